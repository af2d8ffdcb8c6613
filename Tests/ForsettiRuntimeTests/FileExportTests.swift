import CForsetti
import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiRuntime

/// forsetti/services/file_export.h with real modules, in the host and in a worker: the file
/// lands in the module's own subdirectory of the export directory under the last component of
/// its name, and nowhere else.
@Suite(.onTestThreads) struct FileExportTests {
  /// A module that writes in `start` (`steps`, C calls of `ex(label, name, data, flags, cap)`)
  /// and logs each outcome as `LABEL r=STATUS path=PATH`.
  static func exporter(_ steps: String, id: String = "com.test.exporter") -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: "exporter_entry")
    f.prelude = """
      static const forsetti_file_export *g_x;
      static void ex(const char *label, const char *name, const char *data, uint32_t flags, size_t cap) {
        char path[4096] = {0};
        int r = g_x->write(name, data, strlen(data), flags, cap ? path : NULL, cap);
        char line[4400];
        snprintf(line, sizeof line, "%s r=%d path=%s", label, r, path);
        fixture_log(line);
      }
      """
    f.start = """
      g_x = host->resolve(FORSETTI_SERVICE_FILE_EXPORT);
      if (!g_x) { fixture_log("resolve=NULL"); return FORSETTI_OK; }
      \(steps)
      fixture_log("exports done");
      return FORSETTI_OK;
      """
    return f
  }

  /// Gates and starts what `h` holds, on a host whose export directory is `export`.
  static func start(_ h: RuntimeHarness, export: String?, isolated: Bool) throws -> ModuleManager {
    let report = try ManifestDiscovery.discover(from: DirectoryManifestSource(root: h.dir.url("manifests")))
    let context = GateContext(
      approvals: .init(approveAll: true), providers: ProviderAvailability(discovered: report.manifests))
    let index = BinaryIndex.build(directories: [h.dir.url("plugins")])
    let judgements = GateStack.judge(
      report, context: context, inspect: index.inspectionStep(for:), laterSteps: nil)
    let m = ModuleManager(
      environment: HostEnvironment(stateDirectory: h.dir.url("state"), log: h.log, exportDirectory: export),
      mode: isolated ? RuntimeHarness.isolated() : .inProcess)
    m.activate(judgements, index: index)
    return m
  }

  /// The module's line starting with `label `.
  static func outcome(_ h: RuntimeHarness, _ label: String, id: String = "com.test.exporter") -> String? {
    h.waitForLine(id) { $0.hasPrefix(label + " ") }
  }

  @Test(arguments: [false, true])
  func writesReplaceAppendAndRefuseBadNames(isolated: Bool) throws {
    let h = RuntimeHarness()
    let top = h.dir.url("export")
    // The module's own directory: made by the host when missing, taken as it is when present.
    let export = top + "/com.test.exporter"
    try FileManager.default.createDirectory(atPath: export, withIntermediateDirectories: true)
    // A link planted under each name a module will use, pointing outside the export directory.
    let outside = try h.dir.write("outside.txt", "outside")
    try FileManager.default.createSymbolicLink(atPath: export + "/planted", withDestinationPath: outside)
    try FileManager.default.createSymbolicLink(
      atPath: export + "/planted-append", withDestinationPath: outside)
    let passwd = try String(contentsOfFile: "/etc/passwd", encoding: .utf8)
    try Self.exporter(
      """
      ex("plain", "report.txt", "hello", 0, 4096);
      ex("escape", "../../etc/passwd", "not a passwd", 0, 4096);
      ex("empty", "", "x", 0, 4096);
      ex("dot", ".", "x", 0, 4096);
      ex("dotdot", "..", "x", 0, 4096);
      ex("dirdotdot", "a/..", "x", 0, 4096);
      ex("root", "/", "x", 0, 4096);
      ex("trailing", "sub/name.csv/", "csv", 0, 4096);
      ex("first", "log.txt", "a", 0, 4096);
      ex("append", "log.txt", "b", FORSETTI_FILE_EXPORT_APPEND, 4096);
      ex("fresh", "new.txt", "c", FORSETTI_FILE_EXPORT_APPEND, 4096);
      ex("planted", "planted", "replaced", 0, 4096);
      ex("plantedappend", "planted-append", "appended", FORSETTI_FILE_EXPORT_APPEND, 4096);
      ex("small", "small.txt", "x", 0, 5);
      ex("flags", "flags.txt", "x", 0x2, 4096);
      ex("nopath", "nopath.txt", "quiet", 0, 0);
      """
    ).install(in: h.dir, capabilities: ["file_export"])
    let m = try Self.start(h, export: top, isolated: isolated)
    defer { m.stopAll() }
    #expect(h.waitForLine("com.test.exporter") { $0 == "exports done" } != nil, "\(h.log.all.map(\.message))")

    #expect(Self.outcome(h, "plain") == "plain r=0 path=\(export)/report.txt")
    #expect(try String(contentsOfFile: export + "/report.txt", encoding: .utf8) == "hello")
    let attributes = try FileManager.default.attributesOfItem(atPath: export + "/report.txt")
    #expect((attributes[.posixPermissions] as? Int) == 0o640)

    #expect(Self.outcome(h, "escape") == "escape r=0 path=\(export)/passwd")
    #expect(try String(contentsOfFile: export + "/passwd", encoding: .utf8) == "not a passwd")
    #expect(try String(contentsOfFile: "/etc/passwd", encoding: .utf8) == passwd)

    for label in ["empty", "dot", "dotdot", "dirdotdot", "root"] {
      #expect(Self.outcome(h, label) == "\(label) r=\(FORSETTI_ERR_INVALID_ARGUMENT) path=")
    }
    #expect(Self.outcome(h, "trailing") == "trailing r=0 path=\(export)/name.csv")

    #expect(Self.outcome(h, "append") == "append r=0 path=\(export)/log.txt")
    #expect(try String(contentsOfFile: export + "/log.txt", encoding: .utf8) == "ab")
    #expect(try String(contentsOfFile: export + "/new.txt", encoding: .utf8) == "c")

    // Replacing renames a new file over the link; appending refuses to open through it.
    #expect(Self.outcome(h, "planted") == "planted r=0 path=\(export)/planted")
    let planted = try FileManager.default.attributesOfItem(atPath: export + "/planted")
    #expect(planted[.type] as? FileAttributeType == .typeRegular)
    #expect(try String(contentsOfFile: export + "/planted", encoding: .utf8) == "replaced")
    #expect(Self.outcome(h, "plantedappend") == "plantedappend r=\(FORSETTI_ERR_DENIED) path=")
    #expect(try String(contentsOfFile: outside, encoding: .utf8) == "outside")

    #expect(Self.outcome(h, "small") == "small r=\(FORSETTI_ERR_BUFFER_TOO_SMALL) path=")
    #expect(!FileManager.default.fileExists(atPath: export + "/small.txt"))
    #expect(Self.outcome(h, "flags") == "flags r=\(FORSETTI_ERR_INVALID_ARGUMENT) path=")
    #expect(!FileManager.default.fileExists(atPath: export + "/flags.txt"))
    #expect(Self.outcome(h, "nopath") == "nopath r=0 path=")
    #expect(try String(contentsOfFile: export + "/nopath.txt", encoding: .utf8) == "quiet")

    // No temporary file is left behind.
    let left = try FileManager.default.contentsOfDirectory(atPath: export).filter { $0.hasPrefix(".") }
    #expect(left.isEmpty, "\(left)")
  }

  @Test(arguments: [false, true])
  func withoutAnExportDirectoryEveryWriteIsUnavailableWithOneWarning(isolated: Bool) throws {
    let h = RuntimeHarness()
    try Self.exporter(
      """
      ex("one", "a.txt", "x", 0, 4096);
      ex("two", "b.txt", "x", 0, 4096);
      """
    ).install(in: h.dir, capabilities: ["file_export"])
    let m = try Self.start(h, export: nil, isolated: isolated)
    defer { m.stopAll() }
    #expect(h.waitForLine("com.test.exporter") { $0 == "exports done" } != nil)
    #expect(Self.outcome(h, "one") == "one r=\(FORSETTI_ERR_UNAVAILABLE) path=")
    #expect(Self.outcome(h, "two") == "two r=\(FORSETTI_ERR_UNAVAILABLE) path=")
    let warnings = h.log.all.filter {
      $0.level == .warning && $0.moduleID == "com.test.exporter" && $0.message.contains("--export-dir")
    }
    #expect(warnings.count == 1, "\(warnings.map(\.message))")
  }

  @Test(arguments: [false, true])
  func withoutTheCapabilityTheServiceDoesNotResolve(isolated: Bool) throws {
    let h = RuntimeHarness()
    let export = h.dir.url("export")
    try FileManager.default.createDirectory(atPath: export, withIntermediateDirectories: true)
    try Self.exporter(#"ex("x", "a.txt", "x", 0, 4096);"#).install(in: h.dir, capabilities: ["storage"])
    let m = try Self.start(h, export: export, isolated: isolated)
    defer { m.stopAll() }
    #expect(h.waitForLine("com.test.exporter") { $0 == "resolve=NULL" } != nil)
    #expect(try FileManager.default.contentsOfDirectory(atPath: export).isEmpty)
  }

  /// The host checks the grant it holds on every call, whatever a worker sends.
  @Test func aCallerWithoutTheGrantIsDenied() throws {
    let dir = TemporaryDirectory("export-denied")
    let export = dir.url("export")
    try FileManager.default.createDirectory(atPath: export, withIntermediateDirectories: true)
    let log = MemoryLogSink()
    let services = HostServices(stateDirectory: dir.url("state"), exportDirectory: export, log: log)
    let request = ServiceRequest(
      .exportWrite, capacity: 4096, number: HostFunctions.exportWantsPath, [Array("a.txt".utf8), [1, 2]])
    let denied = services.answer(request, from: ModuleCaller(moduleID: "com.test.x", granted: [.storage]))
    #expect(denied.status == FORSETTI_ERR_DENIED)
    #expect(!FileManager.default.fileExists(atPath: export + "/com.test.x/a.txt"))
    #expect(log.all.contains { $0.message.contains("capability file_export was not granted") })
    let allowed = services.answer(request, from: ModuleCaller(moduleID: "com.test.x", granted: [.fileExport]))
    #expect(allowed.status == FORSETTI_OK)
    #expect(allowed.bytes == Array("\(export)/com.test.x/a.txt".utf8) + [0])
    #expect(FileManager.default.fileExists(atPath: export + "/com.test.x/a.txt"))
  }

  /// A module's directory replaced by a link to a neighbour's (as a module in the host could):
  /// the host refuses to write through it, and the neighbour's file stays as it was.
  @Test func aModulesDirectoryThatIsALinkIsRefused() throws {
    let dir = TemporaryDirectory("export-dir-link")
    let export = dir.url("export")
    try FileManager.default.createDirectory(atPath: export + "/com.test.y", withIntermediateDirectories: true)
    try "mine".write(toFile: export + "/com.test.y/a.txt", atomically: false, encoding: .utf8)
    try FileManager.default.createSymbolicLink(
      atPath: export + "/com.test.x", withDestinationPath: "com.test.y")
    let log = MemoryLogSink()
    let services = HostServices(stateDirectory: dir.url("state"), exportDirectory: export, log: log)
    for flags: Int64 in [0, Int64(FORSETTI_FILE_EXPORT_APPEND)] {
      let r = services.answer(
        ServiceRequest(.exportWrite, number: flags, [Array("a.txt".utf8), Array("theirs".utf8)]),
        from: ModuleCaller(moduleID: "com.test.x", granted: [.fileExport]))
      #expect(r.status == FORSETTI_ERR_DENIED)
    }
    #expect(try String(contentsOfFile: export + "/com.test.y/a.txt", encoding: .utf8) == "mine")
    #expect(
      log.all.contains { $0.message.contains("\(export)/com.test.x is a symbolic link or not a directory") })
    // The neighbour itself still writes (positive control).
    let ok = services.answer(
      ServiceRequest(.exportWrite, [Array("a.txt".utf8), Array("new".utf8)]),
      from: ModuleCaller(moduleID: "com.test.y", granted: [.fileExport]))
    #expect(ok.status == FORSETTI_OK)
    #expect(try String(contentsOfFile: export + "/com.test.y/a.txt", encoding: .utf8) == "new")
  }

  @Test func namesAreTheLastComponentAsUpstreamHasThem() throws {
    #expect(try FileExportService.fileName(Array("../../etc/passwd".utf8)) == "passwd")
    #expect(try FileExportService.fileName(Array("dir/file.txt/".utf8)) == "file.txt")
    for bad in ["", ".", "..", "/", "x/..", "///", String(repeating: "n", count: 256)] {
      #expect(throws: FileExportService.Failure.self) { try FileExportService.fileName(Array(bad.utf8)) }
    }
    #expect(FileExportService.normalised("/a/./b/../c//") == "/a/c")
    // Refused whole, before the name is cut to its last component.
    for bad: [UInt8] in [
      Array("a\nb".utf8), Array("\u{1b}[31m".utf8), Array("x\u{7f}".utf8), Array("csi\u{9b}".utf8),
      Array("nel\u{85}".utf8), Array("ls\u{2028}".utf8), Array("ps\u{2029}".utf8),
      Array("rlo\u{202e}txt.exe".utf8), Array("fsi\u{2068}".utf8), Array("bad\n/ok.txt".utf8),
      [0x66, 0xFF, 0x6F],
    ] {
      #expect(throws: FileExportService.Failure.self) { try FileExportService.fileName(bad) }
    }
    #expect(try FileExportService.fileName(Array("résumé 2026 – ok.txt".utf8)) == "résumé 2026 – ok.txt")
    #expect(ExportNameRule.shown(Array("a\nb\u{1b}".utf8)) == "a\\nb\\u{1b}")
    #expect(ExportNameRule.shown([0x66, 0xFF, 0x6F]) == "f\\xffo")
    #expect(ExportNameRule.shown(Array("rlo\u{202e}x".utf8)) == "rlo\\u{202e}x")
  }
}
