import Glibc

/// Why a request could not be made or served.
public enum ControlError: Error, Sendable, Equatable, CustomStringConvertible {
  case malformed(String)
  /// A field of the request (named) is missing, of the wrong type, or not the verb's.
  case field(String, String)
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
    case .field(let name, let why):
      "malformed control request: \"\(ModuleText.visible(String(name.prefix(64))))\" \(why)"
    case .version(1):
      "the client speaks control protocol 1 (command-line arguments and captured text); this host speaks protocol 2 (typed requests, docs/control.md): use forsetti-host from the same build as the host"
    case .version(let v):
      "the other side speaks control protocol \(v); this one speaks \(ControlRequest.protocolVersion): use forsetti-host from the same build as the host"
    case .unknownVerb(let v):
      "the host does not serve '\(ModuleText.visible(String(v.prefix(64))))' (it serves \(ControlRequest.verbs.sorted().joined(separator: ", ")))"
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

  /// The failure a host answers this with, naming the request's field when one is at fault.
  public var failure: ControlFailure {
    var failure = ControlFailure(code, description)
    // A member the client made up is not a field of any request, and a setting is never one.
    if case .field(let name, _) = self, let field = ControlFailure.Field(rawValue: name), !field.isSetting {
      failure.field = field
    }
    return failure
  }

  /// The code a host answers this with.
  public var code: ControlFailure.Code {
    switch self {
    case .malformed, .field, .version, .unknownVerb, .unreachable: .usage
    case .refused, .untrustedListener, .notTheHost: .refused
    case .timedOut, .hostGone: .timedOut
    case .busy: .busy
    }
  }
}
