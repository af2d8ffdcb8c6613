import ForsettiTestSupport
import Foundation
import Glibc
import Testing

/// Issue 40, first finding, second half: a module's sandbox directory had no bound (only its
/// `TMPDIR` does, `TemporaryDirectoryBoundTests`). The host now counts each sandbox against
/// `--sandbox-quota` and brakes a worker over it with RLIMIT_FSIZE (`SandboxQuota`): a module
/// writing 1 MiB files one after another gets EFBIG past its quota, writes again once it deleted
/// what it wrote, and one that raises its own limit while over is refused every write until it
/// restarts; the storage service's `set` over the quota is FORSETTI_ERR_QUOTA. The control: with
/// `--sandbox-quota 0` the same module writes every file it tries.
@Suite(.onTestThreads, .serialized) struct SandboxQuotaTests {
  static let id = "com.test.sandboxfill"
  /// Files the module tries, 1 MiB each: far more than a count a second lets through past 8 MiB.
  static let files = 128

  static var filler: ModuleFixture {
    var f = ModuleFixture(moduleID: id, entryPoint: "sandboxfill_entry")
    f.prelude = """
      #include <errno.h>
      #include <fcntl.h>
      #include <pthread.h>
      #include <stdio.h>
      #include <stdlib.h>
      #include <string.h>
      #include <sys/resource.h>
      #include <unistd.h>
      static pthread_t g_thread;
      static char g_chunk[1 << 20];
      static void say(const char *l) { g_host->log(FORSETTI_LOG_INFO, l); }
      /* Writes file `name` of 1 MiB in the sandbox: 0, or the errno of the failure. */
      static int put(const char *name) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", getenv("HOME"), name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) return errno;
        ssize_t n = write(fd, g_chunk, sizeof g_chunk);
        int e = n < 0 ? errno : (n < (ssize_t)sizeof g_chunk ? EFBIG : 0);
        close(fd);
        return e;
      }
      /* Writes until a write fails, 20 ms apart, at most `tries`: the tries taken and the errno. */
      static int until_refused(const char *stem, int tries, int *taken) {
        char name[64];
        for (int i = 0; i < tries; i++) {
          snprintf(name, sizeof name, "%s%d", stem, i);
          int e = put(name);
          if (e) { *taken = i + 1; return e; }
          usleep(20000);
        }
        *taken = tries;
        return 0;
      }
      static void *fill(void *a) {
        (void)a; char l[200]; int taken = 0;
        memset(g_chunk, 0x5a, sizeof g_chunk);
        int e = until_refused("f", \(files), &taken);
        snprintf(l, sizeof l, "fill files=%d errno=%d", taken, e); say(l);
        if (!e) return NULL;
        /* The host's storage service, writing in the worker, says the quota by name. */
        const forsetti_storage *st = g_host->resolve(FORSETTI_SERVICE_STORAGE);
        int kv = st ? st->set("k", g_chunk, 4096) : -1000;
        snprintf(l, sizeof l, "kv quota=%d", kv == FORSETTI_ERR_QUOTA); say(l);
        /* Frees what it wrote but the first file, then writes again until that is allowed. */
        char path[600];
        for (int i = 1; i < taken; i++) {
          snprintf(path, sizeof path, "%s/f%d", getenv("HOME"), i); unlink(path);
        }
        int tries = 0;
        for (; tries < 1000 && (e = put("again")); tries++) usleep(20000);
        snprintf(l, sizeof l, "again tries=%d errno=%d", tries, e); say(l);
        /* Over again, then raises its own soft limit to the hard one and writes on. */
        e = until_refused("g", \(files), &taken);
        struct rlimit r; getrlimit(RLIMIT_FSIZE, &r);
        r.rlim_cur = r.rlim_max; setrlimit(RLIMIT_FSIZE, &r);
        snprintf(l, sizeof l, "raised files=%d errno=%d hard=%llu", taken, e, (unsigned long long)r.rlim_max); say(l);
        e = until_refused("h", 1000, &taken);
        getrlimit(RLIMIT_FSIZE, &r);
        snprintf(l, sizeof l, "locked files=%d errno=%d hard=%llu", taken, e, (unsigned long long)r.rlim_max); say(l);
        return NULL;
      }
      """
    f.start = "pthread_create(&g_thread, NULL, fill, NULL); return FORSETTI_OK;"
    return f
  }

  static func words(_ line: String?) -> [String: Int] { TemporaryDirectoryBoundTests.words(line) }

  @Test(arguments: HostileHost.Identity.allCases)
  func aModuleCannotFillTheHostsDiskThroughItsSandbox(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    try h.install(Self.filler, capabilities: ["storage"])
    let bounded = try h.run(
      for: 120, extraArguments: ["--sandbox-quota", "8"],
      stopWhen: { $0.contains("locked files=") || $0.contains("fill files=\(Self.files) ") })
    let lines = bounded.lines(Self.id)
    let context = bounded.output.suffix(3000)
    func line(_ prefix: String) -> [String: Int] { Self.words(lines.first { $0.hasPrefix(prefix) }) }
    let fill = line("fill ")
    #expect(fill["errno"] == Int(EFBIG), "\(context)")
    #expect((fill["files"] ?? .max) < Self.files, "\(context)")
    #expect(
      bounded.output.contains("each sandbox up to 8 MiB, counted by the host"), "the start line: \(context)")
    #expect(bounded.output.contains("over its sandbox quota"), "\(context)")
    #expect(line("kv ")["quota"] == 1, "storage set over the quota: \(context)")
    // Deleting what it wrote lets it write again.
    #expect(line("again ")["errno"] == 0, "\(context)")
    #expect(bounded.output.contains("back under its sandbox quota"), "\(context)")
    // Raising its own limit while over ends every write, for good.
    let locked = line("locked ")
    #expect(locked["errno"] == Int(EFBIG), "\(context)")
    #expect(locked["hard"] == 0, "\(context)")
    #expect(bounded.output.contains("raised its own file-size limit"), "\(context)")
    // Said once each time it crosses, not at every count.
    let overs = bounded.output.components(separatedBy: "] over its sandbox quota").count - 1
    #expect(overs == 2, "\(overs) lines: \(context)")

    try? FileManager.default.removeItem(atPath: h.sandbox(Self.id))
    let unbounded = try h.run(
      for: 120, extraArguments: ["--sandbox-quota", "0"], stopWhen: { $0.contains("fill files=") })
    let control = Self.words(unbounded.lines(Self.id).first { $0.hasPrefix("fill ") })
    #expect(control["files"] == Self.files && control["errno"] == 0, "\(unbounded.output.suffix(2000))")
    #expect(!unbounded.output.contains("over its sandbox quota"), "\(unbounded.output.suffix(2000))")
    #expect(
      unbounded.output.contains("sandboxes unbounded (--sandbox-quota 0)"), "\(unbounded.output.suffix(2000))"
    )
  }
}
