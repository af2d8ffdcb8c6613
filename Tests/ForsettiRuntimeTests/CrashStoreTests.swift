import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiRuntime

/// The README promises `crashes/<moduleID>/` holds the newest 10 crash reports: twelve crashes,
/// some in the same second, leave the ten newest, read back oldest first, and another module's
/// reports are not counted against them.
@Suite struct CrashStoreTests {
  static func report(_ id: String, time: Int64, signal: Int32) -> CrashReport {
    CrashReport(
      moduleID: id, time: time, signal: signal, code: 0, address: 0, addressPlace: nil, frames: [])
  }

  @Test func theNewestTenReportsOfEachModuleAreKept() throws {
    let dir = TemporaryDirectory("crash-store")
    let store = CrashStore(stateDirectory: dir.path)
    // Times 100, 100, 101, 101, …: two crashes a second, so the order within a second counts
    // too (`-0`, `-1`); each report's signal is its number, to tell them apart.
    for n in 0..<12 {
      #expect(store.save(Self.report("com.test.crashy", time: 100 + Int64(n / 2), signal: Int32(n + 1))))
    }
    #expect(store.save(Self.report("com.test.other", time: 50, signal: 99)))

    let kept = store.reports(of: "com.test.crashy")
    #expect(CrashStore.kept == 10)
    #expect(kept.map(\.signal) == Array(3...12).map(Int32.init), "\(kept.map(\.signal))")
    let files = try FileManager.default.contentsOfDirectory(atPath: dir.path + "/crashes/com.test.crashy")
    #expect(files.count == 10, "\(files.sorted())")
    #expect(store.reports(of: "com.test.other").map(\.signal) == [99])
    #expect(store.modules == ["com.test.crashy", "com.test.other"])
  }
}
