import FoundationEssentials
import Glibc

/// A file operation's failure in the system's words ("Permission denied"), without Foundation's
/// localizedDescription (Foundation, not FoundationEssentials, has it).
enum SystemReason {
  /// The errno text behind `error` when FileManager reports one, else the error itself.
  static func of(_ error: any Error) -> String {
    if let posix = error as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
    if let cocoa = error as? CocoaError, let posix = cocoa.underlying as? POSIXError {
      return String(cString: strerror(posix.code.rawValue))
    }
    return "\(error)"
  }
}
