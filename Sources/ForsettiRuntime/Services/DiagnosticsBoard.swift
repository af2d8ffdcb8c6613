import CForsetti
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc
import Synchronization

/// What a module said about its own health (forsetti/services/diagnostics.h): its claim, shown
/// as such, never the host's finding. Summaries and counter names are the module's text: show
/// them escaped (`LogRecord.streamSafe`).
package struct ModuleHealth: Sendable, Equatable {
  /// FORSETTI_HEALTH_*.
  package enum Status: Int32, Sendable, CaseIterable {
    case ok = 0, degraded, failing

    /// The word shown for it.
    package var name: String {
      switch self {
      case .ok: "ok"
      case .degraded: "degraded"
      case .failing: "failing"
      }
    }
  }

  /// nil until the module calls `report` (it may set counters first).
  package var status: Status?
  package var summary: String?
  /// Counter name → value; at most FORSETTI_DIAGNOSTICS_MAX_COUNTERS.
  package var counters: [String: Int64]
  /// When the module last reported or set a counter.
  package var updated: Date

  package init(
    status: Status? = nil, summary: String? = nil, counters: [String: Int64] = [:], updated: Date = Date()
  ) {
    self.status = status
    self.summary = summary
    self.counters = counters
    self.updated = updated
  }
}

/// forsetti/services/diagnostics.h on the host's side: the latest health each running module
/// reported about itself, dropped when it stops.
final class DiagnosticsBoard: Sendable {
  private let reports = Mutex<[String: ModuleHealth]>([:])

  init() {}

  /// Why a report or a counter was refused, with the offending value.
  enum Refusal: Error, Equatable {
    case unknownHealth(Int64)
    case summary(bytes: Int)
    case counterName(String)
    case tooManyCounters(Int)

    var status: Int32 {
      switch self {
      case .summary, .tooManyCounters: FORSETTI_ERR_TOO_LARGE
      case .unknownHealth, .counterName: FORSETTI_ERR_INVALID_ARGUMENT
      }
    }
  }

  func answer(_ r: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    do throws(Refusal) {
      switch r.operation {
      case .diagnosticsReport: try report(caller.moduleID, health: r.number, summary: r.argument(0))
      case .diagnosticsCounter: try counter(caller.moduleID, name: r.argument(0) ?? [], value: r.number)
      default: return .status(FORSETTI_ERR_INVALID_ARGUMENT)
      }
    } catch {
      return .status(error.status)
    }
    return .status(FORSETTI_OK)
  }

  /// Sets `moduleID`'s status and summary (an empty summary is none).
  func report(_ moduleID: String, health: Int64, summary: [UInt8]?) throws(Refusal) {
    guard let code = Int32(exactly: health), let status = ModuleHealth.Status(rawValue: code) else {
      throw .unknownHealth(health)
    }
    var text: String?
    if let summary, !summary.isEmpty {
      guard summary.count <= Int(FORSETTI_DIAGNOSTICS_MAX_SUMMARY),
        let s = String(validating: summary, as: UTF8.self)
      else { throw .summary(bytes: summary.count) }
      text = s
    }
    reports.withLock {
      var h = $0[moduleID] ?? ModuleHealth()
      h.status = status
      h.summary = text
      h.updated = Date()
      $0[moduleID] = h
    }
  }

  /// Sets counter `name` of `moduleID`; a new name beyond the limit is refused.
  func counter(_ moduleID: String, name raw: [UInt8], value: Int64) throws(Refusal) {
    guard Self.validCounterName(raw) else {
      throw .counterName(String(decoding: raw.prefix(80), as: UTF8.self))
    }
    let name = String(decoding: raw, as: UTF8.self)
    let limit = Int(FORSETTI_DIAGNOSTICS_MAX_COUNTERS)
    let refused: Int? = reports.withLock {
      var h = $0[moduleID] ?? ModuleHealth()
      if h.counters[name] == nil, h.counters.count >= limit { return h.counters.count }
      h.counters[name] = value
      h.updated = Date()
      $0[moduleID] = h
      return nil
    }
    if let refused { throw .tooManyCounters(refused) }
  }

  /// 1–64 bytes of [A-Za-z0-9._-].
  static func validCounterName(_ b: [UInt8]) -> Bool {
    guard (1...Int(FORSETTI_DIAGNOSTICS_MAX_COUNTER_NAME)).contains(b.count) else { return false }
    return b.allSatisfy { c in
      (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E
        || c == 0x5F || c == 0x2D
    }
  }

  /// Drops what `moduleID` reported: it stopped.
  func forget(_ moduleID: String) {
    _ = reports.withLock { $0.removeValue(forKey: moduleID) }
  }

  /// What every running module reported, by module ID.
  var snapshot: [String: ModuleHealth] { reports.withLock { $0 } }
}
