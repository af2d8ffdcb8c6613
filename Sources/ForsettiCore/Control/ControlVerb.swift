/// The verbs a running host serves, each declared once: its name, the request fields it takes
/// beside `verb`, and whether it may write the state directory (its answer then lists the
/// modules whose state changed). The protocol's verb list, the command line's remote verbs and
/// its writing set are derived from this table; `ControlCommand` is the typed request of each.
public struct ControlVerb: Sendable, Hashable {
  public let name: String
  /// The request's fields besides `verb`, as docs/control.md lists them.
  public let fields: [String]
  /// Whether a request of the verb may write the state directory (`override list` does not).
  public let writes: Bool
  /// Whether only a running host answers it: the command line has no answer of its own on the
  /// files, and its verb asks the host itself (`upgrade`).
  public let onlyAHost: Bool

  init(name: String, fields: [String], writes: Bool, onlyAHost: Bool = false) {
    self.name = name
    self.fields = fields
    self.writes = writes
    self.onlyAHost = onlyAHost
  }

  public static let all: [ControlVerb] = [
    ControlVerb(name: "status", fields: [], writes: false),
    ControlVerb(name: "list", fields: [], writes: false),
    ControlVerb(name: "explain", fields: ["module"], writes: false),
    ControlVerb(name: "surface", fields: [], writes: false),
    ControlVerb(name: "approve", fields: ["module", "capabilities"], writes: true),
    ControlVerb(name: "revoke", fields: ["module", "capabilities"], writes: true),
    ControlVerb(
      name: "override",
      fields: ["action", "channel", "id", "from", "until", "persisted", "windows", "inMemory"],
      writes: true),
    ControlVerb(name: "enable", fields: ["module"], writes: true),
    ControlVerb(name: "disable", fields: ["module"], writes: true),
    ControlVerb(name: "select", fields: ["module", "none"], writes: true),
    ControlVerb(name: "reload", fields: ["module"], writes: false),
    ControlVerb(name: "upgrade", fields: [], writes: false, onlyAHost: true),
  ]

  /// The verb of that name; nil for one the host does not serve.
  public static func named(_ name: String) -> ControlVerb? { all.first { $0.name == name } }
}
