/// The `status` answer: whether a host runs on the state directory, and how many of its modules
/// are in each state; with none, the pid of the last one if it published anything.
public struct StatusAnswer: Sendable, Equatable {
  public var running: Bool
  public var stateDirectory: String
  /// The running host's pid (nil when none runs).
  public var pid: Int32?
  /// State name → how many of the running host's modules are in it, by name.
  public var modules: [(name: String, count: Int)]
  /// The last host's pid, when none runs.
  public var lastPID: Int32?
  /// The running host's image: its version and its upgrades (nil from a host that says none).
  public var image: Image?

  /// What a running host's image is, and how it came to be (`forsetti-host upgrade`).
  public struct Image: Sendable, Equatable {
    /// The version of the executable answering.
    public var version: String
    /// When the host's first image started (seconds since 1970), however many upgrades since.
    public var startedAt: Int64
    /// How many upgrades this host has been through, and the token of the last one.
    public var upgrades: Int
    public var upgradeToken: String?
    /// When this image took the host over (seconds since 1970): the last upgrade's time; nil
    /// while the host runs the image it started with.
    public var upgradedAt: Int64?
    /// Why the last upgrade asked of this image did not happen, if one did not.
    public var upgradeFailure: String?

    public init(
      version: String, startedAt: Int64, upgrades: Int = 0, upgradeToken: String? = nil,
      upgradedAt: Int64? = nil, upgradeFailure: String? = nil
    ) {
      self.version = version
      self.startedAt = startedAt
      self.upgrades = upgrades
      self.upgradeToken = upgradeToken
      self.upgradedAt = upgradedAt
      self.upgradeFailure = upgradeFailure
    }

    var json: JSONValue {
      var o = JSONObject([
        ("version", .string(version)), ("startedAt", .number(String(startedAt))),
        ("upgrades", .number(String(upgrades))),
      ])
      o["upgradeToken"] = upgradeToken.map { .string($0) } ?? .null
      o["upgradedAt"] = upgradedAt.map { .number(String($0)) } ?? .null
      o["upgradeFailure"] = upgradeFailure.map { .string($0) } ?? .null
      return .object(o)
    }

    static func read(_ value: JSONValue) throws(ControlError) -> Image {
      let o = try AnswerFields(value, "image")
      guard let started = Int64(exactly: try o.integer("startedAt")) else {
        throw .field("startedAt", "is not a time")
      }
      // Absent from a host older than it, which said no time.
      var upgradedAt: Int64?
      if let v = o.value("upgradedAt"), !v.isNull {
        guard let at = v.integerValue.flatMap(Int64.init(exactly:)) else {
          throw .field("upgradedAt", "is not a time")
        }
        upgradedAt = at
      }
      return Image(
        version: try o.string("version"), startedAt: started, upgrades: try o.integer("upgrades"),
        upgradeToken: try o.optionalString("upgradeToken"), upgradedAt: upgradedAt,
        upgradeFailure: try o.optionalString("upgradeFailure"))
    }
  }

  /// A running host's status.
  public static func running(pid: Int32, stateDirectory: String, states: [String], image: Image? = nil)
    -> StatusAnswer
  {
    var counts: [String: Int] = [:]
    for s in states { counts[s, default: 0] += 1 }
    return StatusAnswer(
      running: true, stateDirectory: stateDirectory, pid: pid,
      modules: counts.keys.sorted().map { ($0, counts[$0] ?? 0) }, lastPID: nil, image: image)
  }

  /// No host runs on `stateDirectory`.
  public static func notRunning(stateDirectory: String, lastPID: Int32?) -> StatusAnswer {
    StatusAnswer(
      running: false, stateDirectory: stateDirectory, pid: nil, modules: [], lastPID: lastPID, image: nil)
  }

  public static func == (a: StatusAnswer, b: StatusAnswer) -> Bool {
    a.running == b.running && a.stateDirectory == b.stateDirectory && a.pid == b.pid && a.lastPID == b.lastPID
      && a.image == b.image
      && a.modules.map(\.name) == b.modules.map(\.name) && a.modules.map(\.count) == b.modules.map(\.count)
  }

  /// The answer document (`status --json`).
  public var json: JSONValue {
    guard running else {
      var o = JSONObject([("running", .bool(false)), ("state", .string(stateDirectory))])
      o["lastPID"] = lastPID.map { .number(String($0)) } ?? .null
      return .object(o)
    }
    var o = JSONObject([
      ("running", .bool(true)), ("pid", .number(String(pid ?? 0))), ("state", .string(stateDirectory)),
      ("modules", .object(JSONObject(modules.map { ($0.name, .number(String($0.count))) }))),
    ])
    if let image { o["image"] = image.json }
    return .object(o)
  }

  /// Reads a host's status answer; a member missing or of the wrong type is refused by name.
  public static func decode(_ value: JSONValue) -> Result<StatusAnswer, ControlError> {
    do throws(ControlError) {
      let o = try AnswerFields(value, "status answer")
      let state = try o.string("state")
      guard try o.bool("running") else {
        let last = o.value("lastPID")?.integerValue.flatMap(Int32.init(exactly:))
        return .success(.notRunning(stateDirectory: state, lastPID: last))
      }
      guard let pid = Int32(exactly: try o.integer("pid")) else { throw .field("pid", "is not a process ID") }
      guard let counts = o.value("modules")?.objectValue else { throw .field("modules", "must be an object") }
      var modules: [(name: String, count: Int)] = []
      for (name, v) in counts.members {
        guard let n = v.integerValue else { throw .field(name, "must be a count") }
        modules.append((name, n))
      }
      let image = try o.optionalObject("image").map { (v) throws(ControlError) in try Image.read(v) }
      return .success(
        StatusAnswer(
          running: true, stateDirectory: state, pid: pid, modules: modules, lastPID: nil, image: image))
    } catch {
      return .failure(error)
    }
  }
}
