import ForsettiBinary
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// GNU-versioned exports, built with a linker version script and `.symver` as vendors do:
/// the index must judge them as `dlsym` will find them.
@Suite(.onTestThreads) struct VersionedSymbolTests {
  let dir = TemporaryDirectory("versioned")

  /// Builds `name` from `source` with `script` as its version script.
  @discardableResult
  func build(_ name: String, _ source: String, script: String) throws -> String {
    let map = try dir.write("src/\(name).map", script)
    return try CFixture.sharedObject(
      name, source: source, in: dir, extraFlags: ["-Wl,--version-script," + map])
  }

  /// What plain `dlsym` returns for `symbol` in `path` (called, so the right version is seen).
  func dlsymResult(_ path: String, _ symbol: String) -> Int32? {
    guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else { return nil }
    guard let sym = dlsym(handle, symbol) else { return nil }
    return unsafeBitCast(sym, to: (@convention(c) () -> Int32).self)()
  }

  static let twoVersions = """
    int my_entry_v1(void) { return 1; }
    int my_entry_v2(void) { return 2; }
    __asm__(".symver my_entry_v1, my_entry@V1");
    __asm__(".symver my_entry_v2, my_entry@@V2");
    """
  static let twoVersionsScript = "V1 { global: my_entry; local: *; };\nV2 { global: my_entry; } V1;\n"

  @Test func aDefaultVersionBesideAnOldOneIsOneExportOfOneFile() throws {
    let so = try build("libtwo.so", Self.twoVersions, script: Self.twoVersionsScript)
    let index = BinaryIndex.build(directories: [dir.path])
    #expect(try index.locate(entryPoint: "my_entry").get().path == so)
    #expect(index.exporters["my_entry"] == [so])
    let facts = try ELFInspector.inspect(so).get()
    #expect(facts.exportedFunctions.filter { $0 == "my_entry" }.count == 1)
    // What the host will load: dlsym finds the default version.
    #expect(dlsymResult(so, "my_entry") == 2)
  }

  @Test func aVersionedExportAndAnotherFileAreStillAmbiguous() throws {
    let two = try build("libtwo.so", Self.twoVersions, script: Self.twoVersionsScript)
    let plain = try CFixture.sharedObject("plain.so", source: "int my_entry(void) { return 3; }\n", in: dir)
    let index = BinaryIndex.build(directories: [dir.path])
    guard case .failure(let v) = index.locate(entryPoint: "my_entry") else {
      Issue.record("two files exporting my_entry accepted")
      return
    }
    #expect(v.reason == .ambiguousEntryPoint)
    #expect(v.detail.contains("2 files: \(two), \(plain)"), "\(v.detail)")
  }

  @Test func onlyANonDefaultVersionIsEntryPointMissingAndSaysWhy() throws {
    let so = try build(
      "libone.so",
      """
      int only_entry_v1(void) { return 1; }
      __asm__(".symver only_entry_v1, only_entry@V1");
      """, script: "V1 { global: only_entry; local: *; };\n")
    let index = BinaryIndex.build(directories: [dir.path])
    guard case .failure(let v) = index.locate(entryPoint: "only_entry") else {
      Issue.record("a non-default version passed; dlsym cannot find it")
      return
    }
    #expect(v.reason == .entryPointMissing)
    #expect(v.detail.contains(so))
    #expect(v.detail.contains("non-default version V1 (only_entry@V1)"), "\(v.detail)")
    #expect(v.detail.contains("dlsym cannot find"), "\(v.detail)")
    #expect(v.detail.contains("export an unversioned only_entry"), "\(v.detail)")
    #expect(v.detail.contains("only_entry@@V1"), "\(v.detail)")
    let facts = try ELFInspector.inspect(so).get()
    #expect(!facts.exportedFunctions.contains("only_entry"))
    let symbol = try #require(facts.symbol(named: "only_entry"))
    #expect(symbol.version == "V1" && !symbol.isDefaultVersion)
    // The judgement matches the loader: plain dlsym does not find it.
    #expect(dlsymResult(so, "only_entry") == nil)
  }

  @Test func twoNonDefaultVersionsAreBothNamed() throws {
    try build(
      "libold.so",
      """
      int old_entry_a(void) { return 1; }
      int old_entry_b(void) { return 2; }
      __asm__(".symver old_entry_a, old_entry@V1");
      __asm__(".symver old_entry_b, old_entry@V2");
      """, script: "V1 { global: old_entry; local: *; };\nV2 { global: old_entry; } V1;\n")
    let index = BinaryIndex.build(directories: [dir.path])
    guard case .failure(let v) = index.locate(entryPoint: "old_entry") else {
      Issue.record("non-default versions passed")
      return
    }
    #expect(v.reason == .entryPointMissing)
    #expect(v.detail.contains("non-default versions V1, V2 (old_entry@V1, old_entry@V2)"), "\(v.detail)")
  }

  @Test func aSingleDefaultVersionPassesAndLoads() throws {
    let so = try build(
      "libdef.so",
      """
      int def_entry_v1(void) { return 7; }
      __asm__(".symver def_entry_v1, def_entry@@V1");
      """, script: "V1 { global: def_entry; local: *; };\n")
    let index = BinaryIndex.build(directories: [dir.path])
    #expect(try index.locate(entryPoint: "def_entry").get().path == so)
    #expect(try ELFInspector.inspect(so).get().symbol(named: "def_entry")?.version == "V1")
    #expect(dlsymResult(so, "def_entry") == 7)
  }

  @Test func aVersionScriptWithoutSymverIsAnOrdinaryExport() throws {
    // The common case: a version script naming the export puts it at the default version.
    let so = try build(
      "libscript.so", "int script_entry(void) { return 5; }\n",
      script: "V9 { global: script_entry; local: *; };\n")
    let index = BinaryIndex.build(directories: [dir.path])
    #expect(try index.locate(entryPoint: "script_entry").get().path == so)
    #expect(dlsymResult(so, "script_entry") == 5)
  }
}
