import ForsettiTestSupport
import Foundation
import Testing

/// Issue 41, second finding: `check` passed binaries that cannot load. A module built against
/// `libdep.so.1` with the symbol version `DEP_2.0`, shipped beside a `libdep.so.1` that defines
/// only `DEP_1.0`, and a module needing a library that is not there, were PASS for `check`;
/// `run` failed later at `dlopen`. The ELF gate now resolves each module's closure and checks
/// every versioned symbol it needs: both are blocked `binaryIncompatible` at `inspectBinary`,
/// by `check --plugins` and by `run` (as root and as uid 65534), naming the library, the
/// version and the symbol, and no worker loads them. The control: with the library that defines
/// `DEP_2.0` in place the same module starts.
@Suite(.onTestThreads) struct BinaryCompatibilityTests {
  static let newLibrary = "int dep_old(void) { return 1; }\nint dep_answer(void) { return 2; }\n"
  static let newVersions =
    "DEP_1.0 { global: dep_old; local: *; };\nDEP_2.0 { global: dep_answer; } DEP_1.0;\n"
  static let oldLibrary = "int dep_old(void) { return 1; }\n"
  static let oldVersions = "DEP_1.0 { global: dep_old; local: *; };\n"

  /// `libdep.so.1` built from `source` with `versions` into `relative` of `h`'s directory.
  static func library(
    _ h: HostileHost, _ relative: String, _ name: String, _ source: String, _ versions: String
  )
    throws -> String
  {
    try FileManager.default.createDirectory(atPath: h.dir.url(relative), withIntermediateDirectories: true)
    let script = try h.dir.write("src/\(name).\(versions.count).map", versions)
    return try CFixture.sharedObject(
      "\(relative)/\(name)", source: source, in: h.dir,
      extraFlags: ["-Wl,--version-script=\(script)", "-Wl,-soname,\(name)"])
  }

  /// A module calling `dep_answer` (DEP_2.0) of `libdep.so.1`, found through `$ORIGIN/libs`.
  static func module(_ id: String, _ entry: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = "#include <stdio.h>\nint dep_answer(void);\n"
    f.start = """
      char line[64];
      snprintf(line, sizeof line, "answer %d", dep_answer());
      fixture_log(line);
      return FORSETTI_OK;
      """
    return f
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func aModuleNeedingAVersionItsLibraryLacksIsBlockedBeforeLoad(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    // Linked against the new library; shipped with the old one.
    let linkedAgainst = try Self.library(h, "build", "libdep.so.1", Self.newLibrary, Self.newVersions)
    try FileManager.default.createSymbolicLink(
      atPath: h.dir.url("build/libdep.so"), withDestinationPath: "libdep.so.1")
    try Self.module("com.test.depv2", "depv2_entry").install(
      in: h.dir,
      ccFlags: [
        "-L", (linkedAgainst as NSString).deletingLastPathComponent, "-ldep", "-Wl,-rpath,$ORIGIN/libs",
      ])
    _ = try Self.library(h, "plugins/libs", "libdep.so.1", Self.oldLibrary, Self.oldVersions)

    let check = try h.cli([
      "check", "--manifests", h.dir.url("manifests"), "--plugins", h.dir.url("plugins"), "--state",
      h.dir.url("state"), "--approve-all",
    ])
    #expect(check.status == 1, "\(check.stdout)\(check.stderr)")
    #expect(check.stdout.contains("binaryIncompatible"), "\(check.stdout)")
    for named in ["DEP_2.0", "libdep.so.1", "dep_answer", h.dir.url("plugins/libs/libdep.so.1")] {
      #expect(check.stdout.contains(named), "\(named): \(check.stdout)")
    }
    let run = try h.run(
      for: 60, stopWhen: { $0.contains("com.test.depv2") && $0.contains("binaryIncompatible") })
    #expect(run.output.contains("binaryIncompatible"), "\(run.output)")
    #expect(!run.output.contains("loadFailed"), "a worker tried to load it: \(run.output)")
    #expect(!run.lines("com.test.depv2").contains("answer 2"))

    // The control: the library that defines DEP_2.0 beside it, and the module starts.
    _ = try Self.library(h, "plugins/libs", "libdep.so.1", Self.newLibrary, Self.newVersions)
    let control = try h.run(for: 60, stopWhen: { $0.contains("answer 2") })
    #expect(control.lines("com.test.depv2").contains("answer 2"), "\(control.output)")
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func aModuleNeedingAMissingLibraryIsBlockedBeforeLoad(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    let built = try Self.library(h, "build", "libdep.so.1", Self.newLibrary, Self.newVersions)
    try FileManager.default.createSymbolicLink(
      atPath: h.dir.url("build/libdep.so"), withDestinationPath: "libdep.so.1")
    try Self.module("com.test.depgone", "depgone_entry").install(
      in: h.dir,
      ccFlags: ["-L", (built as NSString).deletingLastPathComponent, "-ldep", "-Wl,-rpath,$ORIGIN/libs"])
    let check = try h.cli([
      "check", "--manifests", h.dir.url("manifests"), "--plugins", h.dir.url("plugins"), "--state",
      h.dir.url("state"), "--approve-all",
    ])
    #expect(check.status == 1, "\(check.stdout)\(check.stderr)")
    #expect(check.stdout.contains("binaryIncompatible"), "\(check.stdout)")
    #expect(check.stdout.contains("libdep.so.1, needed by"), "\(check.stdout)")
    #expect(check.stdout.contains("is not on this system"), "\(check.stdout)")
    let run = try h.run(
      for: 60, stopWhen: { $0.contains("com.test.depgone") && $0.contains("binaryIncompatible") })
    #expect(run.output.contains("binaryIncompatible") && !run.output.contains("loadFailed"), "\(run.output)")
  }
}
