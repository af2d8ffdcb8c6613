import CForsettiSys
import ForsettiBridge
import Glibc
import Synchronization

/// One worker's crash report: made once, when the worker died of a signal its handler saw, from
/// the record the handler left in the worker's mapping (its last word), symbolized from the
/// files the worker loaded, and kept under the state directory (`explain` and `crashes` read it
/// after the host stopped).
final class CrashReporter: Sendable {
  private let moduleID: String
  /// The files a crash of this worker may be symbolized from; nil: no report is made.
  private let files: CrashSymbolizer.Files?
  private let store: CrashStore
  private let made = Mutex<CrashReport?>(nil)

  init(moduleID: String, files: CrashSymbolizer.Files?, stateDirectory: String) {
    self.moduleID = moduleID
    self.files = files
    store = CrashStore(stateDirectory: stateDirectory)
  }

  /// The report of the crash a worker ended with `status` of, made from `record` (its crash
  /// record, still mapped) when a signal other than SIGKILL ended it; nil otherwise.
  func report(status: Int32?, record: UnsafeRawPointer?) -> CrashReport? {
    guard let status, status & 0x7F != 0, status & 0x7F != SIGKILL, let files, let record else { return nil }
    return made.withLock { kept in
      if let kept { return kept }
      let bytes = UnsafeRawBufferPointer(start: record, count: MemoryLayout<forsetti_crash_record>.size)
      guard let capture = CrashCapture.read(bytes) else { return nil }
      var now = timespec()
      clock_gettime(CLOCK_REALTIME, &now)
      let report = CrashSymbolizer.symbolize(
        capture, moduleID: moduleID, files: files, time: Int64(now.tv_sec))
      kept = report
      store.save(report)
      return report
    }
  }

  /// The report made, if any.
  var report: CrashReport? { made.withLock { $0 } }
}
