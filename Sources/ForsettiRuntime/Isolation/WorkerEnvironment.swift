/// A worker's environment: chosen, never inherited. The rule, stated once.
///
/// Every process the host starts for modules — a spawned worker, the zygote, and so every
/// worker the zygote forks — starts from `base`: `PATH`, `LANG` and `LC_*` as the host has
/// them, and `SWIFT_BACKTRACE=enable=no` (the backtracer would exec a helper the worker may not
/// run). A worker told its module replaces its whole environment with `module(sandbox:host:)`
/// before any code of the module runs, while it is still single-threaded (`WorkerMain`): the
/// base, then the variables the operator passed (`--worker-env`), then `HOME` = the module's
/// sandbox and `TMPDIR` = `tmp` inside it. Nothing else of the host's environment reaches a
/// module: not a secret the host was given (`AWS_SECRET_ACCESS_KEY`, a database URL in systemd's
/// `Environment=`), nor what a service manager hands the host (`NOTIFY_SOCKET`, `LISTEN_FDS`).
public struct WorkerEnvironment: Sendable, Equatable {
  /// One variable the operator passes to every worker.
  public struct Variable: Sendable, Equatable {
    public var name: String
    public var value: String
  }

  /// Why an operator's `--worker-env` argument is refused.
  public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not a portable variable name (letters, digits, `_`, not starting with a digit).
    case invalidName(String)
    /// A name the host sets for every worker itself.
    case reserved(String)
    /// `NAME` alone, but the host's environment has no such variable.
    case notSet(String)

    public var description: String {
      switch self {
      case .invalidName(let n):
        "'\(n)' is not a variable name: use letters, digits and _, not starting with a digit"
      case .reserved(let n):
        "\(n) is set by the host for every worker (\(WorkerEnvironment.reserved.sorted().joined(separator: ", ")))"
      case .notSet(let n):
        "\(n) is not set in the host's environment: pass NAME=VALUE, or set it for the host"
      }
    }
  }

  /// The directory inside a module's sandbox that is its `TMPDIR`.
  package static let temporaryDirectory = "tmp"

  /// Names the host sets itself; an operator may not pass them.
  static let reserved: Set<String> = ["HOME", "TMPDIR", "SWIFT_BACKTRACE"]

  /// The variables the operator passes (`--worker-env`), in the order given; a later one of
  /// the same name replaces an earlier one.
  public private(set) var passed: [Variable] = []

  public init() {}

  /// Adds `--worker-env`'s argument: `NAME` (the host's value, read now) or `NAME=VALUE`.
  public mutating func pass(_ argument: String, host: [String: String]) throws(Refusal) {
    let name: String
    let value: String
    if let eq = argument.firstIndex(of: "=") {
      name = String(argument[..<eq])
      value = String(argument[argument.index(after: eq)...])
    } else {
      name = argument
      guard Self.isName(name) else { throw .invalidName(name) }
      guard let v = host[name] else { throw .notSet(name) }
      value = v
    }
    guard Self.isName(name) else { throw .invalidName(name) }
    guard !Self.reserved.contains(name) else { throw .reserved(name) }
    passed.removeAll { $0.name == name }
    passed.append(Variable(name: name, value: value))
  }

  /// What every worker and the zygote start with, from the host's environment `host`.
  package static func base(host: [String: String]) -> [String: String] {
    var out = host.filter { $0.key == "PATH" || $0.key == "LANG" || $0.key.hasPrefix("LC_") }
    out["SWIFT_BACKTRACE"] = "enable=no"
    return out
  }

  /// The whole environment of the worker of the module whose sandbox is `sandbox`.
  package func module(sandbox: String, host: [String: String]) -> [String: String] {
    var out = Self.base(host: host)
    for v in passed { out[v.name] = v.value }
    out["HOME"] = sandbox
    out["TMPDIR"] = sandbox + "/" + Self.temporaryDirectory
    return out
  }

  /// `base` as `NAME=VALUE` strings, sorted, for `posix_spawn`.
  static func spawnStrings(host: [String: String]) -> [String] {
    base(host: host).map { "\($0.key)=\($0.value)" }.sorted()
  }

  /// A POSIX portable name: `[A-Za-z_][A-Za-z0-9_]*`.
  static func isName(_ s: String) -> Bool {
    guard let first = s.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
      return false
    }
    return s.utf8.allSatisfy { c in
      c == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c)
        || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(c)
        || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c)
    }
  }
}
