import CForsetti

/// A failed forsetti.h call: one case per FORSETTI_ERR_* code, so a module can switch over what
/// the host meant, and `other` for a code this SDK does not know (a newer host, or a role
/// provider's own status), so no status is ever lost.
public enum ForsettiError: Error, Sendable, Hashable, CustomStringConvertible {
  /// A malformed argument: NULL, not UTF-8, empty, a refused name, an unknown flag or method.
  case invalidArgument
  /// Not granted: a capability, a declaration, a path, or a role this module holds itself.
  case denied
  /// The module has stopped; the host no longer acts on its calls.
  case revoked
  /// No such key, file, module, subscription or row.
  case notFound
  /// The host or the operating system failed; the host's log says why.
  case io
  /// Over a host limit (key, value, payload, counter count).
  case tooLarge
  /// A buffer was too small; the SDK sizes its own buffers, so this comes from a role provider.
  case bufferTooSmall
  /// A message or event refused: empty type, reserved prefix, to oneself, nested too deep.
  case communicationDenied
  /// The module refused to start.
  case startFailed
  /// Nothing serves now (a role's provider, or file export without `--export-dir`); retry later.
  case unavailable
  /// A role call not answered in time; whether the provider acted is unknown.
  case timeout
  /// Sealed bytes or a stored secret that do not authenticate.
  case invalidData
  /// A role call from a handler back along the path of the call it answers.
  case callCycle
  /// Beyond the operator's storage or export quota; nothing was written.
  case quota
  /// A role provider's queue for this module is full (ABI 1.3); nothing was sent: retry later.
  case busy
  /// A status this SDK has no case for, kept as the host returned it.
  case other(Int32)

  /// Maps a non-zero forsetti.h status to its case; the inverse of `status`.
  public init(_ status: Int32) {
    switch status {
    case FORSETTI_ERR_INVALID_ARGUMENT: self = .invalidArgument
    case FORSETTI_ERR_DENIED: self = .denied
    case FORSETTI_ERR_REVOKED: self = .revoked
    case FORSETTI_ERR_NOT_FOUND: self = .notFound
    case FORSETTI_ERR_IO: self = .io
    case FORSETTI_ERR_TOO_LARGE: self = .tooLarge
    case FORSETTI_ERR_BUFFER_TOO_SMALL: self = .bufferTooSmall
    case FORSETTI_ERR_COMMUNICATION_DENIED: self = .communicationDenied
    case FORSETTI_ERR_START_FAILED: self = .startFailed
    case FORSETTI_ERR_UNAVAILABLE: self = .unavailable
    case FORSETTI_ERR_TIMEOUT: self = .timeout
    case FORSETTI_ERR_INVALID_DATA: self = .invalidData
    case FORSETTI_ERR_CALL_CYCLE: self = .callCycle
    case FORSETTI_ERR_QUOTA: self = .quota
    case FORSETTI_ERR_BUSY: self = .busy
    default: self = .other(status)
    }
  }

  /// The forsetti.h code, for handing back to C (a role handler's answer, a refused start).
  public var status: Int32 {
    switch self {
    case .invalidArgument: FORSETTI_ERR_INVALID_ARGUMENT
    case .denied: FORSETTI_ERR_DENIED
    case .revoked: FORSETTI_ERR_REVOKED
    case .notFound: FORSETTI_ERR_NOT_FOUND
    case .io: FORSETTI_ERR_IO
    case .tooLarge: FORSETTI_ERR_TOO_LARGE
    case .bufferTooSmall: FORSETTI_ERR_BUFFER_TOO_SMALL
    case .communicationDenied: FORSETTI_ERR_COMMUNICATION_DENIED
    case .startFailed: FORSETTI_ERR_START_FAILED
    case .unavailable: FORSETTI_ERR_UNAVAILABLE
    case .timeout: FORSETTI_ERR_TIMEOUT
    case .invalidData: FORSETTI_ERR_INVALID_DATA
    case .callCycle: FORSETTI_ERR_CALL_CYCLE
    case .quota: FORSETTI_ERR_QUOTA
    case .busy: FORSETTI_ERR_BUSY
    case .other(let status): status
    }
  }

  /// The case's name and its code, the way a log line should show both.
  public var description: String {
    switch self {
    case .other(let status): "forsetti status \(status)"
    default: "\(name) (\(status))"
    }
  }

  /// The case's name, stable for logs and tests to match on.
  public var name: String {
    switch self {
    case .invalidArgument: "invalidArgument"
    case .denied: "denied"
    case .revoked: "revoked"
    case .notFound: "notFound"
    case .io: "io"
    case .tooLarge: "tooLarge"
    case .bufferTooSmall: "bufferTooSmall"
    case .communicationDenied: "communicationDenied"
    case .startFailed: "startFailed"
    case .unavailable: "unavailable"
    case .timeout: "timeout"
    case .invalidData: "invalidData"
    case .callCycle: "callCycle"
    case .quota: "quota"
    case .busy: "busy"
    case .other: "other"
    }
  }

  /// Turns a status into a throw, so each wrapper is one line over its C call.
  static func check(_ status: Int32) throws(ForsettiError) {
    if status != FORSETTI_OK { throw ForsettiError(status) }
  }
}
