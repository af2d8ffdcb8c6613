import Glibc

// The control protocol of a running host (docs/control.md):
//
//   STATE/control.sock, a unix stream socket, mode 0600; the host answers only a peer of its
//   own uid (or root), checked with SO_PEERCRED. One request per connection:
//
//   client → host   {"protocol":1,"verb":"list","arguments":["--json"]}\n
//   host → client   {"protocol":1,"host":{"pid":123,"state":"/var/lib/forsetti"},
//                    "status":0,"stdout":"…","stderr":"…"}\n
//
//   `verb` is a command-line verb the host serves (ControlRequest.verbs); `arguments` are the
//   client's arguments for it, without the host's own options (the host adds its own:
//   manifests, plugins, policy, approve-all …, so a client never repeats them). `status` is the
//   exit status the client exits with; `stdout` and `stderr` what it prints. A request the host
//   cannot take is answered with status 2 and the reason in `stderr`. Lines are at most
//   `maxLine` bytes; a request must arrive within `requestTimeout` seconds.

/// A request to a running host: a verb it serves and the client's arguments for it.
public struct ControlRequest: Sendable, Equatable {
  public var verb: String
  public var arguments: [String]

  /// The protocol spoken here; a request or answer of another version is refused.
  public static let protocolVersion = 1
  /// The verbs a host serves through its socket.
  public static let verbs: Set<String> = [
    "status", "list", "explain", "surface", "approve", "revoke", "override", "enable", "disable",
    "select", "reload",
  ]
  /// The longest line either side sends or accepts.
  public static let maxLine = 1 << 20
  static let maxArguments = 64
  static let maxArgumentBytes = 4096
  /// Seconds a client has to send its request, and the host to answer it.
  public static let requestTimeout = 5.0
  public static let answerTimeout = 60.0

  public init(verb: String, arguments: [String]) {
    self.verb = verb
    self.arguments = arguments
  }

  /// The request as one line.
  public var line: [UInt8] {
    let doc = JSONValue.object(
      JSONObject([
        ("protocol", .number(String(Self.protocolVersion))), ("verb", .string(verb)),
        ("arguments", .strings(arguments)),
      ]))
    return Array((JSONWriter.string(doc) + "\n").utf8)
  }

  /// Reads a request line from a client (untrusted): the reason it cannot be taken, or the
  /// request.
  public static func decode(_ bytes: [UInt8]) -> Result<ControlRequest, ControlError> {
    guard bytes.count <= maxLine else {
      return .failure(.malformed("a request longer than \(maxLine) bytes"))
    }
    guard let value = try? JSONParser.parse(bytes), let o = value.objectValue else {
      return .failure(.malformed("a request that is not a JSON object"))
    }
    guard let version = o["protocol"]?.integerValue else {
      return .failure(.malformed("no \"protocol\" number"))
    }
    guard version == protocolVersion else { return .failure(.version(version)) }
    guard let verb = o["verb"]?.stringValue else { return .failure(.malformed("no \"verb\" string")) }
    guard verbs.contains(verb) else { return .failure(.unknownVerb(verb)) }
    guard let list = o["arguments"]?.arrayValue, list.count <= maxArguments else {
      return .failure(.malformed("\"arguments\" must be an array of at most \(maxArguments) strings"))
    }
    var arguments: [String] = []
    for item in list {
      guard let s = item.stringValue, s.utf8.count <= maxArgumentBytes else {
        return .failure(.malformed("each argument must be a string of at most \(maxArgumentBytes) bytes"))
      }
      arguments.append(s)
    }
    return .success(ControlRequest(verb: verb, arguments: arguments))
  }
}

/// A running host's answer: what the client prints and the status it exits with.
public struct ControlResponse: Sendable, Equatable {
  public var status: Int32
  public var stdout: String
  public var stderr: String
  /// The host that answered.
  public var pid: Int32
  public var stateDirectory: String

  public init(status: Int32, stdout: String = "", stderr: String = "", pid: Int32, stateDirectory: String) {
    self.status = status
    self.stdout = stdout
    self.stderr = stderr
    self.pid = pid
    self.stateDirectory = stateDirectory
  }

  /// The answer as one line.
  public var line: [UInt8] {
    let doc = JSONValue.object(
      JSONObject([
        ("protocol", .number(String(ControlRequest.protocolVersion))),
        (
          "host",
          .object(JSONObject([("pid", .number(String(pid))), ("state", .string(stateDirectory))]))
        ),
        ("status", .number(String(status))), ("stdout", .string(stdout)), ("stderr", .string(stderr)),
      ]))
    return Array((JSONWriter.string(doc) + "\n").utf8)
  }

  /// Reads a host's answer line.
  public static func decode(_ bytes: [UInt8]) -> Result<ControlResponse, ControlError> {
    guard let value = try? JSONParser.parse(bytes), let o = value.objectValue else {
      return .failure(.malformed("an answer that is not a JSON object"))
    }
    guard let version = o["protocol"]?.integerValue else { return .failure(.malformed("no \"protocol\"")) }
    guard version == ControlRequest.protocolVersion else { return .failure(.version(version)) }
    guard let host = o["host"]?.objectValue,
      let pid = host["pid"]?.integerValue.flatMap(Int32.init(exactly:)),
      let state = host["state"]?.stringValue,
      let status = o["status"]?.integerValue.flatMap(Int32.init(exactly:)),
      let out = o["stdout"]?.stringValue, let err = o["stderr"]?.stringValue
    else { return .failure(.malformed("an answer without host, status, stdout and stderr")) }
    return .success(
      ControlResponse(status: status, stdout: out, stderr: err, pid: pid, stateDirectory: state))
  }
}

/// Why a request could not be made or served.
public enum ControlError: Error, Sendable, Equatable, CustomStringConvertible {
  case malformed(String)
  /// The other side speaks this protocol version.
  case version(Int)
  case unknownVerb(String)
  /// The host answers only its own user (and root).
  case refused(peerUID: UInt32, hostUID: UInt32)
  /// The socket exists but cannot be reached (`errno`).
  case unreachable(path: String, errno: Int32)
  /// Nobody answered in time.
  case timedOut(Double)

  public var description: String {
    switch self {
    case .malformed(let why): "malformed control message: \(why)"
    case .version(let v):
      "the other side speaks control protocol \(v); this one speaks \(ControlRequest.protocolVersion): use forsetti-host from the same build as the host"
    case .unknownVerb(let v):
      "the host does not serve '\(v)' (it serves \(ControlRequest.verbs.sorted().joined(separator: ", ")))"
    case .refused(let peer, let host):
      "the host answers only its own user (uid \(host)) and root; this client is uid \(peer)"
    case .unreachable(let path, let e):
      e == EACCES || e == EPERM
        ? "cannot reach \(path): permission denied (the host answers only its own user)"
        : "cannot reach \(path): \(String(cString: strerror(e)))"
    case .timedOut(let s): "no answer within \(s) s"
    }
  }
}
