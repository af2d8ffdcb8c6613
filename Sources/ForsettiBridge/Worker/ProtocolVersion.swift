import ForsettiCore

/// The version of the host–worker protocol, the one number both halves check before anything
/// else: the host sends its own in `configure`, the worker refuses a host that speaks another
/// (a `loadFailed`, before it confines or loads anything) and answers with its own in `confined`,
/// which the host checks in turn. A host and a worker from different builds may disagree about
/// any frame after that, so neither goes on. The frames themselves are tabled at the top of
/// `Sources/ForsettiRuntime/Isolation/WorkerProtocol.swift`.
public enum ProtocolVersion {
  /// What this build speaks. Raise it with any change a worker or host of the previous build
  /// would misread: a frame kind, a value's position or meaning, a member of the `configure`,
  /// `confined` or `loaded` JSON that one side requires, the order of the frames. Version 0 is
  /// the protocol before versions were exchanged (a JSON object without `protocolVersion`).
  public static let current = 6

  /// The versions of running workers a host serves when it takes them over from its previous
  /// image (`forsetti-host upgrade`): a worker of another version has its module stopped and
  /// started anew, alone. Widen it when a change leaves a running worker of an older version
  /// served correctly (the host then answers it as that version).
  /// 6 changed only `configure` (`cgroupTasks`), which a running worker is past: 5 is served alike.
  public static let adoptable: ClosedRange<Int> = 5...current

  /// The member of the `configure` and `confined` JSON objects that carries the version.
  public static let member = "protocolVersion"

  /// The version a `configure` or `confined` payload says its sender speaks: 0 when it says
  /// none (or not as a whole number); nil when the payload is no JSON object at all.
  public static func of(json text: String) -> Int? { of(try? JSONParser.parse(text)) }

  /// The same, of a payload parsed already.
  public static func of(_ payload: JSONValue?) -> Int? {
    guard let o = payload?.objectValue else { return nil }
    return o[member]?.integerValue ?? 0
  }

  /// What either side reports when the two differ, the same sentence from both.
  public static func mismatch(worker: Int, host: Int) -> String {
    "forsetti-worker speaks protocol \(worker); this host speaks \(host): install the worker from the same build as the host"
  }
}
