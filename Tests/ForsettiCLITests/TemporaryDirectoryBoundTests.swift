import ForsettiTestSupport
import Foundation
import Glibc
import Testing

/// Issue 40, first finding: a module without capabilities filled the host's disk through its
/// `TMPDIR` (3 GiB in 12–16 s, as root and unprivileged). A worker's `TMPDIR` is now a tmpfs of
/// `--tmpdir-size` MiB in a mount namespace of its own: a module writing 1 MiB at a time gets
/// ENOSPC at that size, and nothing it wrote is on the host's disk (the sandbox's `tmp/` seen
/// from the host is empty). The control: with `--tmpdir-size 0` the same module writes all
/// 24 MiB it tries, into the host's `tmp/`, where the test finds them.
@Suite(.onTestThreads, .serialized) struct TemporaryDirectoryBoundTests {
  static let id = "com.test.tmpfill"

  static var filler: ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: "tmpfill_entry")
    f.prelude = """
      #include <errno.h>
      #include <fcntl.h>
      #include <stdio.h>
      #include <stdlib.h>
      #include <string.h>
      #include <unistd.h>
      """
    f.start = """
      const char *tmp = getenv("TMPDIR");
      char path[600], l[300];
      snprintf(path, sizeof path, "%s/fill", tmp ? tmp : "/nowhere");
      int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0) { snprintf(l, sizeof l, "fill open errno=%d", errno); fixture_log(l); return FORSETTI_OK; }
      static char chunk[1 << 20];
      memset(chunk, 0x5a, sizeof chunk);
      long written = 0; int err = 0;
      for (int i = 0; i < 24; i++) {
        ssize_t n = write(fd, chunk, sizeof chunk);
        if (n < 0) { err = errno; break; }
        written += n;
        if (n < (ssize_t)sizeof chunk) { err = ENOSPC; break; }
      }
      close(fd);
      snprintf(l, sizeof l, "fill written=%ld errno=%d", written, err);
      fixture_log(l);
      return FORSETTI_OK;
      """
    return f
  }

  static func words(_ line: String?) -> [String: Int] {
    var out: [String: Int] = [:]
    for part in (line ?? "").split(separator: " ") {
      let kv = part.split(separator: "=", maxSplits: 1)
      if kv.count == 2, let v = Int(kv[1]) { out[String(kv[0])] = v }
    }
    return out
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func aModuleCannotFillTheHostsDiskThroughItsTemporaryDirectory(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    try h.install(Self.filler)
    let hostTmp = h.dir.url("state/sandboxes/\(Self.id)/tmp/fill")
    let bounded = try h.run(
      for: 60, extraArguments: ["--tmpdir-size", "8"], stopWhen: { $0.contains("fill written=") })
    let line = bounded.lines(Self.id).first { $0.hasPrefix("fill ") }
    let w = Self.words(line)
    #expect(w["errno"] == Int(ENOSPC), "\(line ?? "no line"); \(bounded.output.suffix(2000))")
    #expect((w["written"] ?? .max) <= 8 << 20, "\(line ?? "no line")")
    #expect(!FileManager.default.fileExists(atPath: hostTmp), "the module's file is on the host's disk")

    let unbounded = try h.run(
      for: 60, extraArguments: ["--tmpdir-size", "0"], stopWhen: { $0.contains("fill written=") })
    let control = unbounded.lines(Self.id).first { $0.hasPrefix("fill ") }
    #expect(Self.words(control)["written"] == 24 << 20, "\(control ?? "no line")")
    let size = (try? FileManager.default.attributesOfItem(atPath: hostTmp)[.size]) as? Int
    #expect(size == 24 << 20, "the control's file on the host's disk: \(String(describing: size))")
  }
}
