import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Glibc
import Testing

/// Hot reload into the host process, as `dev --in-process` does it: each version is loaded from
/// a sealed memory copy (`/proc/self/fd/N`), and the state files are written only when what they
/// say changed. Real modules, a real `LiveHost`, real files.
@Suite(.onTestThreads, .serialized) struct InProcessReloadTests {
  typealias Rig = ReconcilerTests.Rig

  /// A build of `com.test.hot` that logs `tag` when it starts, and `stop tag` when it stops.
  static func hot(_ tag: String, start: String = "return FORSETTI_OK;") -> ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.hot", entryPoint: "hot_entry")
    f.start = "fixture_log(\"\(tag)\"); \(start)"
    f.stop = "fixture_log(\"stop \(tag)\");"
    return f
  }

  /// Builds `f` elsewhere and renames it over the installed binary, as a build tool does.
  static func replace(_ r: Rig, with f: ModuleFixture) throws {
    let built = try f.build(in: r.h.dir, as: "staging/\(UUID().uuidString).so")
    try #require(rename(built, r.h.dir.url("plugins/hot_entry.so")) == 0)
  }

  static func reload(_ host: ReconcilerTests.Host, _ so: String) -> [ReloadReport.Outcome] {
    var reports: [ReloadReport] = []
    host.onReload = { reports.append($0) }
    host.reconcile(changed: [so])
    return reports.map(\.outcome)
  }

  @Test func eachReloadRunsTheNewBuildFromItsOwnSealedMemoryCopy() throws {
    let r = Rig()
    let so = try Self.hot("v1").install(in: r.h.dir)
    let host = try r.start(development: .init(grace: 0, debounce: 0))
    defer { host.stop() }
    try #require(r.exactly("v1") == 1, "\(r.lines)")
    var seen: Set<String> = []
    for tag in ["v2", "v3", "v4"] {
      try Self.replace(r, with: Self.hot(tag))
      #expect(Self.reload(host, so) == [.reloaded], "\(r.lines.suffix(6))")
      // The build just renamed into place ran, once, and the one before it stopped.
      #expect(r.exactly(tag) == 1, "\(tag) did not start: \(r.lines.suffix(6))")
      let from = try #require(r.record(host, "com.test.hot")?.loadedFrom)
      #expect(from.hasPrefix("/proc/self/fd/"), "\(from)")
      #expect(!seen.contains(from), "a version loaded from an earlier version's copy: \(from)")
      seen.insert(from)
      // A memory copy, sealed: nothing can write the image it was mapped from.
      let target = try FileManager.default.destinationOfSymbolicLink(atPath: from)
      #expect(target.contains("memfd:forsetti:com.test.hot"), "\(target)")
      let w = open(from, O_WRONLY | O_CLOEXEC)
      try #require(w >= 0)
      var byte: UInt8 = 0
      #expect(write(w, &byte, 1) == -1 && errno == EPERM, "the copy of \(tag) is writable")
      #expect(ftruncate(w, 0) == -1 && errno == EPERM, "the copy of \(tag) can be truncated")
      close(w)
    }
    #expect(r.exactly("stop v3") == 1)
    // Nothing copied to disk for a load into this process.
    #expect(!FileManager.default.fileExists(atPath: r.state + "/versions"))
  }

  @Test func aFailedReloadRollsBackToTheOldImage() throws {
    let r = Rig()
    let so = try Self.hot("v1").install(in: r.h.dir)
    let host = try r.start(development: .init(grace: 0, debounce: 0))
    defer { host.stop() }
    try Self.replace(r, with: Self.hot("v2"))
    try #require(Self.reload(host, so) == [.reloaded])
    let v2 = try #require(r.record(host, "com.test.hot")?.loadedFrom)

    // v3 fails its start: v2 runs again, from its own copy (v1 and v3 do not run).
    try Self.replace(r, with: Self.hot("v3", start: "return FORSETTI_ERR_START_FAILED;"))
    #expect(Self.reload(host, so) == [.rolledBack(.startFailed)], "\(r.lines.suffix(6))")
    #expect(r.exactly("v3") == 1)
    #expect(r.exactly("v2") == 2, "v2 did not start again: \(r.lines.suffix(6))")
    #expect(r.exactly("v1") == 1)
    #expect(r.record(host, "com.test.hot")?.loadedFrom == v2)
    #expect(r.state(host, "com.test.hot") == .started)

    // A later good build still loads as itself, not as the rolled-back image.
    try Self.replace(r, with: Self.hot("v4"))
    #expect(Self.reload(host, so) == [.reloaded])
    #expect(r.exactly("v4") == 1, "\(r.lines.suffix(6))")
  }

  @Test func theStateFileIsRewrittenOnlyWhenWhatItSaysChanges() throws {
    let r = Rig()
    let so = try Self.hot("v1").install(in: r.h.dir)
    try r.module("com.test.other")
    let host = try r.start(development: .init(grace: 0, debounce: 0))
    defer { host.stop() }
    let path = r.state + "/runtime.json"
    func inode() -> UInt64? {
      var st = stat()
      return stat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }
    func states() throws -> [String: String] {
      let root = try JSONParser.parse(Array(String(contentsOfFile: path, encoding: .utf8).utf8))
      var out: [String: String] = [:]
      for case .object(let m) in root.objectValue?["modules"]?.arrayValue ?? [] {
        if let id = m["moduleID"]?.stringValue { out[id] = m["state"]?.stringValue }
      }
      return out
    }
    let first = try #require(inode())

    // Rounds that change nothing it says leave the file alone: a supervision pass, a reload.
    host.manager.superviseOnce()
    try Self.replace(r, with: Self.hot("v2"))
    try #require(Self.reload(host, so) == [.reloaded])
    #expect(inode() == first)

    // A change it says is written at once.
    try r.overrides(["com.test.other": "off"])
    host.reconcile()
    #expect(inode() != first)
    let after = try states()
    #expect(after["com.test.other"] != nil && after["com.test.other"] != "started", "\(after)")

    // Removed by someone else: written again on the next round, though nothing changed.
    try FileManager.default.removeItem(atPath: path)
    host.manager.superviseOnce()
    #expect(try states()["com.test.hot"] == "started")
  }
}
