import ForsettiTestSupport
import Foundation
import Glibc
import Testing

/// Issue 41, first finding: a crash said only the signal. A C module built with `-g` that
/// dereferences NULL in `parse_header`, called from `vendor_handle_packet`, called from `start`,
/// now gets a report naming both functions with their `file.c:LINE`, the faulting address and
/// the module's file with its offset, in the log line; the same module without debug
/// information is named by its exported functions. As root and as uid 65534.
@Suite(.onTestThreads) struct CrashReportTests {
  static let id = "com.test.crashy"

  static func crashy(exported: Bool = false, before: String = "") -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: "crashy_entry")
    let visibility = exported ? "" : "static "
    f.prelude = """
      struct header { int length; };
      __attribute__((noinline, noipa)) \(visibility)int parse_header(const struct header *h) {
        return h->length + 1; /* the fault */
      }
      __attribute__((noinline, noipa)) \(visibility)int vendor_handle_packet(const char *packet) {
        int n = parse_header((const struct header *)packet);
        return n * 2;
      }
      """
    f.start = """
      \(before)
      fixture_log("about to crash");
      volatile int sink = vendor_handle_packet(NULL);
      (void)sink;
      return FORSETTI_OK;
      """
    return f
  }

  /// The line of `marker` in `source`, 1-based.
  static func line(of marker: String, in source: String) -> Int? {
    source.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains(marker) }.map {
      $0 + 1
    }
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func aCrashNamesTheFunctionsAndLinesWhereItHappened(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    let f = Self.crashy()
    try f.install(in: h.dir, ccFlags: ["-g", "-O1"])
    let run = try h.run(
      for: 60, extraArguments: ["--max-restarts", "0"], stopWhen: { $0.contains("quarantined") })
    let crash = run.output.split(separator: "\n").first { $0.contains("crashed") && $0.contains(Self.id) }
    let text = String(crash ?? "")
    let fault = try #require(Self.line(of: "the fault", in: f.source))
    let call = try #require(Self.line(of: "int n = parse_header", in: f.source))
    #expect(text.contains("SIGSEGV"), "\(run.output)")
    #expect(text.contains("parse_header") && text.contains(".c:\(fault)"), "\(text)\n\(run.output)")
    #expect(text.contains("vendor_handle_packet") && text.contains(".c:\(call)"), "\(text)")
    #expect(text.contains("address not mapped"), "\(text)")

    // The report outlives the host: `crashes` and `explain` read it from the state directory.
    let crashes = try h.cli(["crashes", Self.id, "--state", h.dir.url("state")])
    #expect(crashes.status == 0, "\(crashes.stderr)")
    for needed in [
      "SIGSEGV", "parse_header", "vendor_handle_packet", ".c:\(fault)", "crashy_entry.so+0x", "build-id",
    ] {
      #expect(crashes.stdout.contains(needed), "\(needed): \(crashes.stdout)")
    }
    let explain = try h.cli([
      "explain", Self.id, "--manifests", h.dir.url("manifests"), "--plugins", h.dir.url("plugins"), "--state",
      h.dir.url("state"),
    ])
    #expect(
      explain.stdout.contains("last crash") && explain.stdout.contains("parse_header"), "\(explain.stdout)")
    let list = try h.cli([
      "list", "--json", "--manifests", h.dir.url("manifests"), "--plugins", h.dir.url("plugins"), "--state",
      h.dir.url("state"),
    ])
    let listed = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any]
    let module = (listed?["modules"] as? [[String: Any]])?.first { $0["moduleID"] as? String == Self.id }
    #expect((module?["lastCrash"] as? String)?.contains("in parse_header") == true, "\(list.stdout)")
    let json = try h.cli(["crashes", "--json", "--state", h.dir.url("state")])
    let parsed = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
    let reports = parsed?["crashes"] as? [[String: Any]] ?? []
    let functions = (reports.last?["frames"] as? [[String: Any]] ?? []).compactMap {
      $0["function"] as? String
    }
    #expect(functions.prefix(2) == ["parse_header", "vendor_handle_packet"], "\(json.stdout)")
  }

  /// Without debug information (`strip --strip-all`: no `.symtab`, no DWARF) the frames are
  /// named by the module's exported symbols (`.dynsym`), still in its file at its offsets.
  @Test(arguments: HostileHost.Identity.allCases)
  func aStrippedModuleIsNamedByItsExportedFunctions(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    let f = Self.crashy(exported: true)
    let so = try f.install(in: h.dir, ccFlags: ["-g", "-O1"])
    let strip = try ProcessRunner.run("/usr/bin/env", ["strip", "--strip-all", so])
    try #require(strip.status == 0, "\(strip.stderr)")
    let run = try h.run(
      for: 60, extraArguments: ["--max-restarts", "0"], stopWhen: { $0.contains("quarantined") })
    let text = String(
      run.output.split(separator: "\n").first { $0.contains("crashed") && $0.contains(Self.id) } ?? "")
    #expect(
      text.contains("SIGSEGV") && text.contains("parse_header") && text.contains("vendor_handle_packet"),
      "\(run.output)")
    #expect(!text.contains(".c:"), "no line numbers without DWARF: \(text)")
  }
}

extension CrashReportTests {
  /// A module that crashes because it ran out of descriptors (it leaked them all, then used the
  /// NULL an open returned) still gets its callers named: the stack is copied through a pipe the
  /// worker made when it armed the handler, not one the handler could no longer make. Without
  /// it only the faulting function, from the registers, was named.
  @Test(arguments: HostileHost.Identity.allCases)
  func aCrashOutOfDescriptorsStillNamesItsCallers(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    let f = Self.crashy(
      before: """
        struct rlimit few = {64, 64};
        setrlimit(RLIMIT_NOFILE, &few);
        int leaked = 0;
        while (dup(2) >= 0) leaked++;
        fixture_log(leaked > 0 ? "out of descriptors" : "nothing leaked");
        """)
    var g = f
    g.prelude = "#include <sys/resource.h>\n#include <unistd.h>\n" + f.prelude
    try g.install(in: h.dir, ccFlags: ["-g", "-O1"])
    let run = try h.run(
      for: 60, extraArguments: ["--max-restarts", "0"], stopWhen: { $0.contains("quarantined") })
    #expect(run.output.contains("out of descriptors"), "\(run.output)")
    let text = String(
      run.output.split(separator: "\n").first { $0.contains("crashed") && $0.contains(Self.id) } ?? "")
    #expect(text.contains("parse_header"), "\(run.output)")
    #expect(text.contains("vendor_handle_packet"), "the caller, found on the copied stack: \(text)")
  }
}

/// A Swift module's crash: a library in Swift (built with `swiftc -g`), shipped beside the
/// module's C entry and called from its `start`, traps on an index out of range; the report
/// names the Swift functions demangled (`VendorKit.decodeLength(…)`), past the runtime's own
/// frames (`Swift._assertionFailure`, the host's: `<host>`).
@Suite(.onTestThreads) struct SwiftCrashReportTests {
  static let swiftSource = """
    struct Packet { var bytes: [UInt8] }

    @inline(never) func decodeLength(_ packet: Packet) -> Int {
      return Int(packet.bytes[7])  // out of range: the trap
    }

    @_cdecl("vendorkit_handle") public func vendorkitHandle() -> Int32 {
      return Int32(decodeLength(Packet(bytes: [1, 2])))
    }
    """

  @Test func aSwiftCrashShowsDemangledNames() throws {
    let h = HostileHost(.current)
    let libs = h.dir.url("plugins/libs")
    try FileManager.default.createDirectory(atPath: libs, withIntermediateDirectories: true)
    let source = try h.dir.write("src/VendorKit.swift", Self.swiftSource)
    let built = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "swiftc", "-emit-library", "-g", "-Onone", "-module-name", "VendorKit", "-o",
        libs + "/libvendorkit.so", source,
      ])
    try #require(built.status == 0, "\(built.stderr)")
    var f = ModuleFixture(moduleID: "com.test.swiftcrash", entryPoint: "swiftcrash_entry")
    f.prelude = "int vendorkit_handle(void);"
    f.start = "volatile int n = vendorkit_handle(); (void)n; return FORSETTI_OK;"
    try f.install(in: h.dir, ccFlags: ["-g", "-L", libs, "-lvendorkit", "-Wl,-rpath,$ORIGIN/libs"])
    let run = try h.run(
      for: 60, extraArguments: ["--max-restarts", "0"], stopWhen: { $0.contains("quarantined") })
    let text = String(
      run.output.split(separator: "\n").first { $0.contains("crashed") && $0.contains("swiftcrash") } ?? "")
    // Past the runtime's frames of the trap, the module's Swift frames first, demangled. (Their
    // source lines are not shown yet: libdw 0.188 finds no line for swiftc's units.)
    #expect(
      text.contains("in VendorKit.decodeLength(VendorKit.Packet) -> Swift.Int ← VendorKit.vendorkitHandle()"),
      "\(run.output)")
    #expect(!text.contains("$s9VendorKit"), "a mangled name: \(text)")
  }
}
