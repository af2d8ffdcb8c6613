import CForsetti

/// forsetti/services/diagnostics.h: the module's own account of its health, which operators
/// see marked as the module's claim.
public struct Diagnostics: @unchecked Sendable {
  // @unchecked: as SecureStorage.
  let raw: UnsafePointer<forsetti_diagnostics>

  /// The health levels of the header, so a report cannot name one the host does not know.
  public enum Health: Int32, Sendable {
    /// Working as it should.
    case ok = 0
    /// Working, but the operator may want to look (retries, a backlog).
    case degraded = 1
    /// Not doing its job.
    case failing = 2
  }

  /// Replaces the last report; the host drops it when the module stops, so report after each start.
  public func report(_ health: Health, _ summary: String? = nil) throws(ForsettiError) {
    guard let report = raw.pointee.report else { throw .unavailable }
    let status =
      if let summary { summary.withCString { report(health.rawValue, $0) } } else {
        report(health.rawValue, nil)
      }
    try ForsettiError.check(status)
  }

  /// Sets one named counter; `.tooLarge` for a 33rd name, `.invalidArgument` for a bad one.
  public func setCounter(_ name: String, _ value: Int64) throws(ForsettiError) {
    guard let setCounter = raw.pointee.set_counter else { throw .unavailable }
    try ForsettiError.check(name.withCString { setCounter($0, value) })
  }
}
