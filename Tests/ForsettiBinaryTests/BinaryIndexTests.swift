import ForsettiBinary
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

@Suite(.onTestThreads) struct BinaryIndexTests {
  let dir = TemporaryDirectory("index")

  func reason(_ index: BinaryIndex, _ entry: String) -> ReasonCode? {
    if case .failure(let v) = index.locate(entryPoint: entry) { return v.reason }
    return nil
  }

  @Test func findsTheOneExporter() throws {
    let a = try CFixture.sharedObject("a.so", source: "int alpha_entry(void) { return 1; }\n", in: dir)
    try CFixture.sharedObject("b.so", source: "int beta_entry(void) { return 2; }\n", in: dir)
    let index = BinaryIndex.build(directories: [dir.path])
    #expect(try index.locate(entryPoint: "alpha_entry").get().path == a)
    #expect(reason(index, "gamma_entry") == .binaryNotFound)
  }

  @Test func twoExportersAreAmbiguous() throws {
    try CFixture.sharedObject("one.so", source: "int twin_entry(void) { return 1; }\n", in: dir)
    try CFixture.sharedObject("two.so", source: "int twin_entry(void) { return 2; }\n", in: dir)
    let index = BinaryIndex.build(directories: [dir.path])
    guard case .failure(let v) = index.locate(entryPoint: "twin_entry") else {
      Issue.record("ambiguous entry point accepted")
      return
    }
    #expect(v.reason == .ambiguousEntryPoint)
    #expect(v.detail.contains("one.so") && v.detail.contains("two.so"))
  }

  @Test func importedOrDataSymbolIsEntryPointMissing() throws {
    try CFixture.sharedObject(
      "c.so",
      source: "extern int wanted_entry(void);\nint data_entry = 3;\nint f(void) { return wanted_entry(); }\n",
      in: dir)
    let index = BinaryIndex.build(directories: [dir.path])
    #expect(reason(index, "wanted_entry") == .entryPointMissing)
    #expect(reason(index, "data_entry") == .entryPointMissing)
  }

  @Test func foreignArchitectureIsArchitectureMismatch() throws {
    let so = try CFixture.sharedObject("x.so", source: "int far_entry(void) { return 1; }\n", in: dir)
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: so)))
    bytes[18] = ELFMachine.host == .aarch64 ? 62 : 183
    bytes[19] = 0
    try dir.write("x.so", bytes: bytes)
    let index = BinaryIndex.build(directories: [dir.path])
    guard case .failure(let v) = index.locate(entryPoint: "far_entry") else {
      Issue.record("foreign binary accepted")
      return
    }
    #expect(v.reason == .architectureMismatch)
    #expect(v.detail.contains("rebuild"))
  }

  @Test func uninspectableFilesMakeAMissingEntryPointInvalidBinary() throws {
    let so = try CFixture.sharedObject("good.so", source: "int good_entry(void) { return 1; }\n", in: dir)
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: so)))
    try dir.write("half.so", bytes: Array(bytes.prefix(bytes.count / 2)))
    try dir.write("noise.so", bytes: (0..<512).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    let index = BinaryIndex.build(directories: [dir.path])
    #expect(try index.locate(entryPoint: "good_entry").get().path == so)
    guard case .failure(let v) = index.locate(entryPoint: "lost_entry") else {
      Issue.record("missing entry point accepted")
      return
    }
    #expect(v.reason == .invalidBinary)
    #expect(v.detail.contains("half.so") && v.detail.contains("truncated"))
    #expect(v.detail.contains("noise.so") && v.detail.contains("not an ELF file"))
  }

  @Test func onlySharedObjectNamesAreIndexed() throws {
    try CFixture.sharedObject("lib.so.1", source: "int versioned_entry(void) { return 1; }\n", in: dir)
    try CFixture.sharedObject("notes.txt", source: "int text_entry(void) { return 1; }\n", in: dir)
    let index = BinaryIndex.build(directories: [dir.path])
    #expect((try? index.locate(entryPoint: "versioned_entry").get()) != nil)
    #expect(reason(index, "text_entry") == .binaryNotFound)
  }

  @Test func signaturesAndTemporaryFilesBesideAModuleAreNotBinaries() throws {
    try CFixture.sharedObject("libm.so", source: "int m_entry(void) { return 1; }\n", in: dir)
    try dir.write("libm.so.sig", "{\"keyID\":\"x\"}")
    try CFixture.sharedObject("libm.so.tmp", source: "int m_entry(void) { return 2; }\n", in: dir)
    try CFixture.sharedObject("libv.so.2.1", source: "int v_entry(void) { return 1; }\n", in: dir)
    let index = BinaryIndex.build(directories: [dir.path])
    #expect(index.paths.map { ($0 as NSString).lastPathComponent } == ["libm.so", "libv.so.2.1"])
    #expect((try? index.locate(entryPoint: "m_entry").get()) != nil)
    #expect(index.failures.isEmpty)
  }

  @Test func addingAFileAgainReplacesWhatItSaid() throws {
    let so = try CFixture.sharedObject("r.so", source: "int re_entry(void) { return 1; }\n", in: dir)
    var index = BinaryIndex.build(directories: [dir.path])
    index.add(so)
    #expect(index.exporters["re_entry"] == [so])
    #expect(try index.locate(entryPoint: "re_entry").get().path == so)
    // Rebuilt without the export, then broken, then healthy again: each answer is the latest.
    try CFixture.sharedObject(
      "r.so", source: "extern int re_entry(void);\nint other(void) { return re_entry(); }\n", in: dir)
    index.add(so)
    #expect(reason(index, "re_entry") == .entryPointMissing)
    try dir.write("r.so", "not ELF")
    index.add(so)
    #expect(reason(index, "re_entry") == .invalidBinary)
    try CFixture.sharedObject("r.so", source: "int fresh_entry(void) { return 1; }\n", in: dir)
    index.add(so)
    #expect(reason(index, "re_entry") == .binaryNotFound)
    #expect(try index.locate(entryPoint: "fresh_entry").get().path == so)
    #expect(index.paths == [so])
  }

  /// The table of names no usable file exports is built on the first miss; an index changed
  /// after that must not answer from it, and a copy made before keeps the answer of its files.
  @Test func aMissingNameIsJudgedOnTheFilesTheIndexHasNow() throws {
    try CFixture.sharedObject("p.so", source: "int present_entry(void) { return 1; }\n", in: dir)
    var index = BinaryIndex.build(directories: [dir.path])
    #expect(reason(index, "late_entry") == .binaryNotFound)
    let before = index
    let late = try CFixture.sharedObject(
      "q.so", source: "extern int late_entry(void);\nint g(void) { return late_entry(); }\n", in: dir)
    index.add(late)
    #expect(reason(index, "late_entry") == .entryPointMissing)
    #expect(reason(before, "late_entry") == .binaryNotFound)
    // The other order: the copy asks first, after the original changed.
    let copy = index
    let data = try CFixture.sharedObject("s.so", source: "int data_late = 1;\n", in: dir)
    index.add(data)
    #expect(reason(copy, "data_late") == .binaryNotFound)
    #expect(reason(index, "data_late") == .entryPointMissing)
  }
}
