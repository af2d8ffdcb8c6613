import ForsettiTestSupport
import Foundation
import Testing

/// Issue 30: the host serves every worker from a fixed set of threads (`WorkerLoop`), so a real
/// `forsetti-host run` with 200 isolated modules, as root and as an unprivileged user, has no
/// more than 32 threads once they have started, while every module's host calls (a log line
/// on the socket, a publish on the call ring) were answered. A thread per worker (as before)
/// would be over 400. Likewise its inotify instances, which the kernel counts per user (128 by
/// default, shared with every other program of that user): one descriptor watches every
/// module's sandbox (`SandboxQuotaMeter`), so 200 modules take a few, not 200.
@Suite(.onTestThreads, .serialized) struct HostThreadBoundTests {
  static let count = 200
  static let bound = 32

  static func id(_ i: Int) -> String { "com.test.threads\(i)" }

  /// One library with `count` modules (one entry point each), so the test compiles once.
  static var source: String {
    var text = """
      #include <forsetti.h>
      #include <stdio.h>

      static forsetti_status up(void *self, const forsetti_host *host) {
        (void)self;
        const forsetti_events *e = host->resolve(FORSETTI_SERVICE_EVENTS);
        char line[64];
        snprintf(line, sizeof line, "up %d", e ? e->publish("threads.up", "x", 1) : -1000);
        host->log(FORSETTI_LOG_INFO, line);
        return FORSETTI_OK;
      }
      static void down(void *self) { (void)self; }
      static const struct forsetti_ui_contributions *no_ui(void *self) { (void)self; return NULL; }

      """
    for i in 0..<count {
      text += """
        static const forsetti_module_descriptor d\(i) = {
          .struct_size = sizeof(forsetti_module_descriptor), .module_id = "\(id(i))",
          .module_type = "service", .version_major = 1, .version_minor = 0, .version_patch = 0,
        };
        static const forsetti_module m\(i) = {
          .abi_version = FORSETTI_ABI_VERSION, .struct_size = sizeof(forsetti_module), .descriptor = &d\(i),
          .start = up, .stop = down, .ui_contributions = no_ui,
        };
        const forsetti_module *threads\(i)_entry(uint32_t abi) { (void)abi; return &m\(i); }

        """
    }
    return text
  }

  /// The inotify instances `pid` holds, and the watches on them.
  static func inotify(of pid: Int32) -> (instances: Int, watches: Int) {
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
    var instances = 0
    var watches = 0
    for fd in fds {
      guard
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"))
          == "anon_inode:inotify"
      else { continue }
      instances += 1
      let info = (try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8)) ?? ""
      watches += info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
    }
    return (instances, watches)
  }

  static func threads(of pid: Int32) -> Int? {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("Threads:") }
    return line.flatMap { Int($0.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)) }
  }

  @Test(.timeLimit(.minutes(5)), arguments: HostileHost.Identity.allCases)
  func twoHundredIsolatedModulesAreServedByAtMost32HostThreads(as identity: HostileHost.Identity) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    let src = try h.dir.write("src/threads.c", Self.source)
    try FileManager.default.createDirectory(atPath: h.dir.url("plugins"), withIntermediateDirectories: true)
    let built = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "cc", "-shared", "-fPIC", "-Wall", "-I", ModuleFixture.includeDirectory, "-o",
        h.dir.url("plugins/threads.so"), src,
      ])
    try #require(built.status == 0, "\(built.stderr)")
    for i in 0..<Self.count {
      let f = ModuleFixture(moduleID: Self.id(i), entryPoint: "threads\(i)_entry")
      try h.dir.write("manifests/\(Self.id(i)).json", f.manifest())
    }
    let output = h.dir.url("host-output.txt")
    let run = try h.run(
      for: 240,
      ready: {
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        return text.components(separatedBy: "] up 0").count - 1 >= Self.count
      },
      observe: { host in
        defer { kill(host, SIGTERM) }
        let workers = WorkerEnvironmentTests.children(of: host, endingWith: "--worker").count
        // The pool grows while the starts' frames pour in and shrinks a second after: waited
        // for (a minute at most, a safety net), never a fixed pause.
        var seen = Self.threads(of: host) ?? Int.max
        let end = Date().addingTimeInterval(60)
        while seen > Self.bound, Date() < end {
          usleep(50_000)
          seen = Self.threads(of: host) ?? Int.max
        }
        let (instances, watches) = Self.inotify(of: host)
        return [
          "threads": String(seen), "workers": String(workers), "inotify": String(instances),
          "watches": String(watches),
        ]
      })
    #expect(run.status == 0, "\(run.stderr)")
    let observed = try #require(run.observed, "not every module said it was up: \(run.output.suffix(2000))")
    // The positive control: the modules ran in workers of their own and their calls were answered.
    #expect(Int(observed["workers"] ?? "") == Self.count, "\(observed)")
    for i in [0, Self.count / 2, Self.count - 1] {
      #expect(run.lines(Self.id(i)).contains("up 0"), "\(run.lines(Self.id(i)))")
    }
    let threads = try #require(Int(observed["threads"] ?? ""))
    #expect(threads <= Self.bound, "the host ran \(threads) threads for \(Self.count) workers")
    // Every sandbox is watched (its directory and TMPDIR's at least), on a few instances.
    #expect(Int(observed["watches"] ?? "") ?? 0 >= Self.count, "\(observed)")
    #expect(Int(observed["inotify"] ?? "") ?? .max <= 8, "\(observed)")
  }
}
