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
//   cannot take is answered with status 2 and the reason in `stderr`; one it cannot take *now*
//   (too many clients, or stopping) with `ControlResponse.busyStatus`, and the client tries
//   again. Lines are at most `maxLine` bytes; the whole request line must arrive within
//   `requestTimeout` seconds of connecting, and the client must take the whole answer within
//   `sendTimeout` seconds.

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
  /// Seconds a client has to send its whole request line, from connecting.
  public static let requestTimeout = 5.0
  /// Seconds the host has to serve a request once read.
  public static let answerTimeout = 60.0
  /// Seconds a client has to take the whole answer.
  public static let sendTimeout = 5.0
  /// Seconds a client keeps trying again while the host says it is busy.
  public static let busyRetry = 10.0

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

  /// The status of "not now: try again" (EX_TEMPFAIL): too many clients, or the host stopping.
  /// No verb exits with it; a client tries again (`ControlRequest.busyRetry`) instead of
  /// printing it.
  public static let busyStatus: Int32 = 75

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
  /// The host (this pid) closed the connection without an answer: it stopped or died mid-request.
  case hostGone(pid: Int32)
  /// The host stayed busy with other clients for this many seconds of trying again.
  case busy(Double)
  /// The socket's listener is not a user the client trusts (root or its own euid).
  case untrustedListener(path: String, peerUID: UInt32, peerPID: Int32, ownUID: UInt32)
  /// The socket's listener is not the process `host.lock` names (nil: no pid recorded there).
  case notTheHost(path: String, peerUID: UInt32, peerPID: Int32, lockPath: String, lockPID: Int32?)

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
    case .hostGone(let pid):
      "the host (pid \(pid)) closed the connection without answering: it stopped or died while serving the request, which may or may not have been applied (see 'forsetti-host status')"
    case .busy(let s):
      "the host stayed busy with other clients for \(s) s of trying again; try again later"
    case .untrustedListener(let path, let uid, let pid, let own):
      "refusing \(path): it is listened on by uid \(uid) (pid \(pid)), which is neither root nor you (uid \(own)); nothing was sent and nothing it says is shown. Remove it if it is not yours, or give --state a directory only you can write"
    case .notTheHost(let path, let uid, let pid, let lockPath, let lockPID):
      "refusing \(path): it is listened on by pid \(pid) (uid \(uid)), but \(lockPath) \(lockPID.map { "names pid \($0)" } ?? "names no host"); nothing was sent and nothing it says is shown"
    }
  }
}
