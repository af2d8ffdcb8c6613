import ForsettiTestSupport
import Foundation
import Glibc
import Testing

@testable import ForsettiRuntime

/// An append holds the file under a private name while it writes (`FileExportService.heldName`):
/// a host that dies there leaves the file under that name. The next write of the name puts it
/// back, so nothing appended before is lost from sight, and a holder still at work is left alone.
@Suite struct FileExportHeldFileTests {
  static func meter() -> Meter {
    Meter(Quota(service: "file export", bytes: 1 << 20, option: "--export-quota"), used: 0, recount: { 0 })
  }

  /// A pid that ran and is gone.
  static func deadPID() throws -> Int32 {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/bin/true")
    try p.run()
    p.waitUntilExit()
    return p.processIdentifier
  }

  @Test func aFileLeftHeldByADeadHostIsPutBackBeforeTheNextAppend() throws {
    let dir = TemporaryDirectory("held")
    let export = dir.url("export")
    let module = export + "/com.test.m"
    try FileManager.default.createDirectory(atPath: module, withIntermediateDirectories: true)
    let prefix = FileExportService.heldPrefix("log.txt")
    try "before the crash\n".write(
      toFile: module + "/\(prefix)\(try Self.deadPID())-7", atomically: false, encoding: .utf8)
    // A holder still running (pid 1 is) is not a leftover: the positive control of "left alone".
    let other = module + "/\(FileExportService.heldPrefix("other.txt"))1-9"
    try "held by a live host\n".write(toFile: other, atomically: false, encoding: .utf8)

    var m = Self.meter()
    try FileExportService.write(
      Array("after\n".utf8), name: "log.txt", in: export, moduleID: "com.test.m", append: true, meter: &m)
    #expect(try String(contentsOfFile: module + "/log.txt", encoding: .utf8) == "before the crash\nafter\n")
    let left = try FileManager.default.contentsOfDirectory(atPath: module).sorted()
    #expect(left == [PathText.name(other), "log.txt"].sorted(), "\(left)")

    // other.txt's holder is alive: its write starts a new file and the held one stays.
    try FileExportService.write(
      Array("new\n".utf8), name: "other.txt", in: export, moduleID: "com.test.m", append: true, meter: &m)
    #expect(try String(contentsOfFile: module + "/other.txt", encoding: .utf8) == "new\n")
    #expect(FileManager.default.fileExists(atPath: other))
  }

  @Test func anAppendLeavesNoHeldNameBehind() throws {
    let dir = TemporaryDirectory("held-clean")
    let export = dir.url("export")
    try FileManager.default.createDirectory(atPath: export, withIntermediateDirectories: true)
    var m = Self.meter()
    for text in ["a\n", "b\n"] {
      try FileExportService.write(
        Array(text.utf8), name: "log.txt", in: export, moduleID: "com.test.m", append: true, meter: &m)
    }
    #expect(try FileManager.default.contentsOfDirectory(atPath: export + "/com.test.m") == ["log.txt"])
    #expect(try String(contentsOfFile: export + "/com.test.m/log.txt", encoding: .utf8) == "a\nb\n")
  }
}
