import ForsettiCore
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Testing

/// `--memory-limit` holds memory of every kind: memory a module keeps in memfds with write(2)
/// maps no address space, so only a cgroup can count it — or, where the host has none, the
/// worker is refused memfds at all.
@Suite(.onTestThreads) struct MemoryContainmentTests {
  /// Writes up to 3 GiB into memfds, 1 MiB at a time, saying how far it got.
  static let memfdHog = """
    #include <errno.h>
    #include <sys/syscall.h>
    static char chunk[1 << 20];
    static void hog(void) {
      memset(chunk, 7, sizeof chunk);
      int mib = 0;
      while (mib < 3072) {
        int fd = (int)syscall(SYS_memfd_create, "hog", 0);
        if (fd < 0) {
          char line[120];
          snprintf(line, sizeof line, "memfd_create refused after %d MiB: %s", mib, strerror(errno));
          fixture_log(line);
          return;
        }
        for (int i = 0; i < 256 && mib < 3072; i++, mib++) {
          if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) {
            char line[120];
            snprintf(line, sizeof line, "write refused after %d MiB: %s", mib, strerror(errno));
            fixture_log(line);
            return;
          }
        }
        /* The descriptor stays open: the memory stays held. */
      }
      fixture_log("held 3072 MiB in memfds");
    }
    """

  @Test func threeGiBInMemfdsUnderAOneGiBLimitIsContained() throws {
    let h = RuntimeHarness()
    var hog = ModuleFixture(moduleID: "com.test.memfdhog", entryPoint: "memfdhog_entry")
    hog.prelude = Self.memfdHog
    hog.start = "hog(); return FORSETTI_OK;"
    try hog.install(in: h.dir)
    var calm = ModuleFixture(moduleID: "com.test.calm", entryPoint: "calm_entry")
    calm.start = "fixture_log(\"calm started\"); return FORSETTI_OK;"
    try calm.install(in: h.dir)

    // Writing a GiB into memfds until the kernel steps in can take seconds on a busy machine: the
    // start timeout must not end it first (it is what is being tested, not how fast).
    let m = try h.start(
      mode: RuntimeHarness.isolated(maxRestarts: 3, backoff: 30, memoryMiB: 1024, startTimeout: 20))
    defer { m.stopAll() }
    #expect(!h.lines("com.test.memfdhog").contains("held 3072 MiB in memfds"))
    if HostCgroups.support.hasPrefix("NO cgroup") {
      // Without a cgroup nothing would count the memfds: the worker may not make one.
      #expect(h.state("com.test.memfdhog") == .started)
      #expect(h.lines("com.test.memfdhog").contains { $0.hasPrefix("memfd_create refused after 0 MiB") })
    } else {
      // In its cgroup the kernel stops it at the limit, and the crash report says so.
      #expect(h.state("com.test.memfdhog") == .failed(.crashed))
      let detail = h.record("com.test.memfdhog")?.trace.firstFailure?.detail ?? ""
      #expect(detail.contains("killed by the kernel at its memory limit"), "\(detail)")
    }
    #expect(h.state("com.test.calm") == .started)
    #expect(h.lines("com.test.calm").contains("calm started"))
  }
}
