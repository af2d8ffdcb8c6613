import ForsettiTestSupport
import Foundation
import Testing

/// A module's own libraries in a worker: the directories its `DT_NEEDED` libraries are found in
/// (as the dynamic loader finds them) are granted read/execute before the worker confines itself,
/// never write; a `DT_RUNPATH` into the host's state, where modules write, is refused before any
/// of the module's code runs. As root and as an unprivileged host.
@Suite(.onTestThreads) struct ModuleLibraryGrantTests {
  /// The vendor's library: one function, in a directory of its own.
  static let helper = "int helper_answer(void) { return 42; }\n"

  /// A module that calls into its own library, then tries to write beside it (found through
  /// `dladdr`, as a module knows no paths).
  static func module(_ id: String, _ entry: String) -> ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.prelude = """
      #include <dlfcn.h>
      #include <errno.h>
      #include <fcntl.h>
      #include <libgen.h>
      #include <stdio.h>
      #include <string.h>
      #include <unistd.h>
      int helper_answer(void);
      """
    f.start = """
      char line[600];
      snprintf(line, sizeof line, "answer %d", helper_answer());
      fixture_log(line);
      Dl_info info;
      if (dladdr((void *)helper_answer, &info) && info.dli_fname) {
        char path[512];
        snprintf(path, sizeof path, "%s", info.dli_fname);
        char target[560];
        snprintf(target, sizeof target, "%s/planted", dirname(path));
        int fd = open(target, O_CREAT | O_WRONLY, 0644);
        snprintf(line, sizeof line, "write beside the library: %s", fd >= 0 ? "written" : strerror(errno));
        if (fd >= 0) close(fd);
        fixture_log(line);
      }
      return FORSETTI_OK;
      """
    return f
  }

  /// Builds the helper into `relativeDirectory` of the host's directory and the module linked
  /// against it with `runpath` (`-Wl,-rpath`, DT_RUNPATH with Debian's default new dtags).
  func install(_ h: HostileHost, _ f: ModuleFixture, helperIn relativeDirectory: String, runpath: String)
    throws
  {
    let lib = try CFixture.sharedObject(
      "\(relativeDirectory)/libhelper.so", source: Self.helper, in: h.dir, extraFlags: [])
    try f.install(
      in: h.dir,
      ccFlags: [
        "-D_GNU_SOURCE", "-L", (lib as NSString).deletingLastPathComponent, "-lhelper",
        "-Wl,-rpath,\(runpath)",
      ])
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func aModuleRunsWithItsOwnLibraryWhichItCannotWrite(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    try FileManager.default.createDirectory(
      atPath: h.dir.url("plugins/libs"), withIntermediateDirectories: true)
    try install(
      h, Self.module("com.test.ownlib", "ownlib_entry"), helperIn: "plugins/libs", runpath: "$ORIGIN/libs")
    let run = try h.run(for: 30, stopWhen: { $0.contains("write beside the library:") })
    #expect(run.lines("com.test.ownlib").contains("answer 42"), "\(run.output)")
    #expect(
      run.lines("com.test.ownlib").contains("write beside the library: Permission denied"), "\(run.output)")
    #expect(!FileManager.default.fileExists(atPath: h.dir.url("plugins/libs/planted")))
    // The control: the directory is writable to the host's user outside the worker.
    #expect(
      try h.cli([
        "explain", "com.test.ownlib", "--manifests", h.dir.url("manifests"),
        "--plugins", h.dir.url("plugins"), "--state", h.dir.url("state"),
      ]).stdout.contains(
        "granted \(h.dir.url("plugins/libs"))"))
    let probe = h.dir.url("plugins/libs/probe")
    let touch = try ProcessRunner.run(
      "/usr/bin/setpriv",
      identity == .unprivileged
        ? ["--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/touch", probe]
        : ["--", "/usr/bin/touch", probe])
    #expect(touch.status == 0 && FileManager.default.fileExists(atPath: probe), "\(touch.stderr)")
  }

  /// Loaded into the host, the module comes from a copy too: its `$ORIGIN` still finds the
  /// library beside the original.
  @Test func inProcessTheModuleFindsItsLibraryThroughOrigin() throws {
    let h = HostileHost(.current)
    try FileManager.default.createDirectory(
      atPath: h.dir.url("plugins/libs"), withIntermediateDirectories: true)
    try install(
      h, Self.module("com.test.ownlib", "ownlib_entry"), helperIn: "plugins/libs", runpath: "$ORIGIN/libs")
    let run = try h.run(for: 30, extraArguments: ["--in-process"], stopWhen: { $0.contains("answer") })
    #expect(run.lines("com.test.ownlib").contains("answer 42"), "\(run.output)")
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func aRunpathIntoTheStateDirectoryIsRefusedBeforeTheModuleRuns(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    // Planted where a module may write (another module's sandbox), and named by the RUNPATH.
    let planted = h.sandbox("com.test.victim")
    try FileManager.default.createDirectory(atPath: planted, withIntermediateDirectories: true)
    try install(
      h, Self.module("com.hostile.runpath", "runpath_entry"), helperIn: "state/sandboxes/com.test.victim",
      runpath: planted)
    let run = try h.run(for: 0)
    #expect(!run.lines("com.hostile.runpath").contains("answer 42"), "\(run.output)")
    #expect(
      run.output.contains(
        "library libhelper.so is in \(planted), which a worker may not read: overlaps \(h.dir.url("state"))"),
      "\(run.output)")
    #expect(run.output.contains("0 ran"), "\(run.output)")
  }
}
