import ForsettiBinary
import ForsettiTestSupport
import Foundation
import Testing

@Suite(.onTestThreads) struct ELFInspectorTests {
  let dir = TemporaryDirectory("elf")

  @Test func readsClassMachineAndExportedFunctions() throws {
    let so = try CFixture.sharedObject(
      "m.so",
      source: """
        int my_entry(int v) { return v; }
        __attribute__((visibility("hidden"))) int internal_helper(int v) { return v + 1; }
        static int file_local(int v) { return v; }
        int data_symbol = 7;
        int uses_local(int v) { return file_local(v) + internal_helper(v); }
        """, in: dir, extraFlags: ["-Wl,--no-as-needed", "-lm"])
    let facts = try ELFInspector.inspect(so).get()
    #expect(facts.elfClass == .host)
    #expect(facts.machine == .host)
    #expect(facts.matchesHost)
    #expect(facts.exportedFunctions.contains("my_entry"))
    #expect(facts.exportedFunctions.contains("uses_local"))
    #expect(!facts.exportedFunctions.contains("internal_helper"))
    #expect(!facts.exportedFunctions.contains("file_local"))
    #expect(!facts.exportedFunctions.contains("data_symbol"))
    #expect(facts.symbol(named: "data_symbol")?.entryPointProblem == "it is a object, not a function")
    #expect(facts.neededLibraries.contains("libm.so.6"))
    #expect(facts.embeddedManifest == nil)
  }

  @Test func readsAnEmbeddedManifestSection() throws {
    let so = try CFixture.sharedObject(
      "embedded.so",
      source: """
        __attribute__((section(".forsetti.manifest"), used))
        static const char manifest[] = "{\\"moduleID\\":\\"com.example.embedded\\"}";
        int embedded_entry(void) { return 0; }
        """, in: dir)
    let facts = try ELFInspector.inspect(so).get()
    #expect(
      facts.embeddedManifest.map { String(decoding: $0, as: UTF8.self) }
        == #"{"moduleID":"com.example.embedded"}"#)
  }

  @Test func undefinedImportIsNotAnExport() throws {
    let so = try CFixture.sharedObject(
      "imp.so",
      source: "extern int provided_elsewhere(void);\nint caller(void) { return provided_elsewhere(); }\n",
      in: dir)
    let facts = try ELFInspector.inspect(so).get()
    let sym = try #require(facts.symbol(named: "provided_elsewhere"))
    #expect(!sym.isDefined)
    #expect(!facts.exportedFunctions.contains("provided_elsewhere"))
    #expect(sym.entryPointProblem?.contains("only imported") == true)
  }

  @Test func rejectsNonELFEmptyAndMissingFiles() throws {
    let text = try dir.write("text.so", "definitely not an ELF file\n")
    let empty = try dir.write("empty.so", "")
    guard case .failure(.notELF(_, let head)) = ELFInspector.inspect(text) else {
      Issue.record("text file accepted")
      return
    }
    #expect(head == "64 65 66 69")
    guard case .failure(.notELF(_, let nothing)) = ELFInspector.inspect(empty) else {
      Issue.record("empty file accepted")
      return
    }
    #expect(nothing.contains("empty"))
    guard case .failure(.unreadable) = ELFInspector.inspect(dir.url("absent.so")) else {
      Issue.record("missing file accepted")
      return
    }
  }

  @Test func rejectsAnExecutable() throws {
    let src = try dir.write("main.c", "int main(void) { return 0; }\n")
    let exe = dir.url("prog")
    let r = try ProcessRunner.run("/usr/bin/env", ["cc", "-no-pie", "-o", exe, src])
    try #require(r.status == 0, "\(r.stderr)")
    guard case .failure(.notSharedObject(_, let type)) = ELFInspector.inspect(exe) else {
      Issue.record("executable accepted as a module")
      return
    }
    #expect(type == 2)  // ET_EXEC
  }

  @Test func everyTruncationIsAnErrorNeverACrash() throws {
    let so = try CFixture.sharedObject("full.so", source: "int entry(void) { return 1; }\n", in: dir)
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: so)))
    var failures = 0
    var cut = 0
    while cut < bytes.count {
      let path = try dir.write("cut.so", bytes: Array(bytes.prefix(cut)))
      if case .failure = ELFInspector.inspect(path) { failures += 1 }
      cut += 37
    }
    // The section table sits at the end of the file, so every strict prefix must be refused.
    #expect(failures == (bytes.count + 36) / 37)
  }

  @Test func randomBytesBehindAnELFMagicAreRefused() throws {
    var rng = SystemRandomNumberGenerator()
    for i in 0..<200 {
      var bytes: [UInt8] = [0x7F, 0x45, 0x4C, 0x46]
      bytes += (0..<(64 + i * 13)).map { _ in UInt8.random(in: 0...255, using: &rng) }
      let path = try dir.write("rand.so", bytes: bytes)
      if case .success(let facts) = ELFInspector.inspect(path) {
        // A random header can only pass if it describes an empty shared object.
        #expect(facts.dynamicSymbols.isEmpty)
      }
    }
  }

  @Test func foreignMachineIsReported() throws {
    let so = try CFixture.sharedObject("arm.so", source: "int arm_entry(void) { return 1; }\n", in: dir)
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: so)))
    let foreign: UInt16 = ELFMachine.host == .aarch64 ? 62 : 183
    bytes[18] = UInt8(foreign & 0xFF)
    bytes[19] = UInt8(foreign >> 8)
    let path = try dir.write("arm.so", bytes: bytes)
    let facts = try ELFInspector.inspect(path).get()
    #expect(facts.machine.rawValue == foreign)
    #expect(!facts.matchesHost)
  }
}
