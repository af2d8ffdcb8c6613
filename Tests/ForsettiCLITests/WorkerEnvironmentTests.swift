import ForsettiTestSupport
import Foundation
import Testing

/// A worker's environment is chosen, not inherited (`WorkerEnvironment.swift`): against a real
/// `forsetti-host run`, as root and as an unprivileged user, with and without the zygote, a
/// module finds no trace of a variable set only in the host's environment — not through getenv,
/// `environ`, `/proc/self/environ` or `/proc/<host>/environ` — and neither does the zygote hold
/// it; what the operator passes with `--worker-env` is there, and HOME and TMPDIR are its sandbox.
@Suite(.onTestThreads, .serialized) struct WorkerEnvironmentTests {
  static let secretName = "FORSETTI_TEST_SECRET"
  static let secret = "s3cret-\(UUID().uuidString)"

  /// Looks for the secret every way a module can, and for what it was given; logs each finding.
  static var seeker: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.hostile.environ", entryPoint: "environ_entry")
    f.prelude = """
      #include <errno.h>
      extern char **environ;
      static void found(const char *where, const char *text) {
        char l[600]; snprintf(l, sizeof l, "%s: %s", where, text); fixture_log(l);
      }
      /// Whether the file holds the secret's value: "refused (why)", "holds the secret", "clean".
      static void search_file(const char *where, const char *path) {
        int fd = open(path, O_RDONLY);
        if (fd < 0) { char w[200]; snprintf(w, sizeof w, "refused (%s)", strerror(errno)); found(where, w); return; }
        static char buf[1 << 20]; size_t n = 0; ssize_t r;
        while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
        close(fd);
        found(where, memmem(buf, n, "\(secret)", strlen("\(secret)")) ? "holds the secret" : "clean");
      }
      """
    f.start = """
      found("getenv secret", getenv("\(secretName)") ? "present" : "absent");
      int in_environ = 0;
      for (char **e = environ; e && *e; e++) if (strstr(*e, "\(secret)")) in_environ = 1;
      found("environ secret", in_environ ? "present" : "absent");
      search_file("/proc/self/environ", "/proc/self/environ");
      char parent[64]; snprintf(parent, sizeof parent, "/proc/%d/environ", (int)getppid());
      search_file("/proc/host/environ", parent);
      const char *names[] = {"FORSETTI_TEST_PASSED", "FORSETTI_TEST_SET", "HOME", "TMPDIR", "PATH"};
      for (int i = 0; i < 5; i++) { const char *v = getenv(names[i]); found(names[i], v ? v : "(unset)"); }
      int count = 0;
      for (char **e = environ; e && *e; e++) count++;
      char c[32]; snprintf(c, sizeof c, "%d", count); found("variables", c);
      char tmp[4200]; snprintf(tmp, sizeof tmp, "%s/probe", getenv("TMPDIR") ? getenv("TMPDIR") : "/nonexistent");
      int t = open(tmp, O_WRONLY | O_CREAT, 0600);
      found("write in TMPDIR", t >= 0 ? "succeeded" : strerror(errno));
      if (t >= 0) close(t);
      found("environment", "searched");
      return FORSETTI_OK;
      """
    return f
  }

  /// The pids of the host's children whose command line ends with `last`.
  static func children(of host: Int32, endingWith last: String) -> [Int32] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return names.compactMap(Int32.init).filter { pid in
      let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
      guard let paren = stat.range(of: ")", options: .backwards) else { return false }
      let fields = stat[paren.upperBound...].split(separator: " ")
      guard fields.count > 1, fields[1] == Substring(String(host)) else { return false }
      let raw = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
      return raw.split(separator: 0).last.map { String(decoding: $0, as: UTF8.self) } == last
    }
  }

  @Test(arguments: HostileHost.Identity.allCases, [true, false])
  func aModuleSeesOnlyTheEnvironmentItIsGiven(as identity: HostileHost.Identity, zygote: Bool) throws {
    let h = HostileHost(identity)
    try #require(h.isAvailable, "running as another user needs root")
    try h.install(Self.seeker)
    let output = h.dir.url("host-output.txt")
    let run = try h.run(
      for: 120,
      extraArguments: [
        "--worker-env", "FORSETTI_TEST_PASSED", "--worker-env", "FORSETTI_TEST_SET=given=literally",
      ]
        + (zygote ? [] : ["--no-zygote"]),
      environment: [Self.secretName: Self.secret, "FORSETTI_TEST_PASSED": "from-the-host"],
      ready: {
        ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains("environment: searched")
      },
      observe: { host in
        // From outside, as root: what the zygote and the worker were started with.
        var seen: [String: String] = [:]
        for (role, last) in [("zygote", "--zygote"), ("worker", zygote ? "--worker" : "--await-config")] {
          for pid in Self.children(of: host, endingWith: last) {
            let environ = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))) ?? Data()
            seen[role] =
              String(decoding: environ, as: UTF8.self).contains(Self.secret) ? "holds the secret" : "clean"
          }
        }
        kill(host, SIGTERM)
        return seen
      })
    #expect(run.status == 0, "\(run.output)")
    let lines = run.lines("com.hostile.environ")
    #expect(lines.contains("environment: searched"), "\(run.output)")
    #expect(lines.contains("getenv secret: absent"), "\(lines)")
    #expect(lines.contains("environ secret: absent"), "\(lines)")
    // Refused (landlock) or clean: never the secret.
    for file in ["/proc/self/environ", "/proc/host/environ"] {
      #expect(lines.contains { $0.hasPrefix("\(file): ") && !$0.hasSuffix("holds the secret") }, "\(lines)")
    }
    // The positive controls: what the operator passed, and HOME and TMPDIR in the sandbox.
    let sandbox = URL(fileURLWithPath: h.sandbox("com.hostile.environ")).standardizedFileURL.path
    #expect(lines.contains("FORSETTI_TEST_PASSED: from-the-host"), "\(lines)")
    #expect(lines.contains("FORSETTI_TEST_SET: given=literally"), "\(lines)")
    #expect(lines.contains("HOME: \(sandbox)"), "\(lines)")
    #expect(lines.contains("TMPDIR: \(sandbox)/tmp"), "\(lines)")
    #expect(lines.contains { $0.hasPrefix("PATH: /") }, "\(lines)")
    #expect(lines.contains("write in TMPDIR: succeeded"), "\(lines)")
    let observed = try #require(run.observed, "\(run.output)")
    #expect(observed["worker"] == "clean", "\(observed)")
    #expect(observed["zygote"] == (zygote ? "clean" : nil), "\(observed)")
  }

  @Test func aBadWorkerEnvIsAUsageError() throws {
    let h = HostileHost(.current)
    for dir in ["manifests", "plugins"] {
      try FileManager.default.createDirectory(atPath: h.dir.url(dir), withIntermediateDirectories: true)
    }
    for (argument, why) in [
      ("1BAD", "is not a variable name"), ("HOME=/x", "is set by the host for every worker"),
      ("FORSETTI_TEST_NEVER_SET", "is not set in the host's environment"),
    ] {
      let run = try h.run(for: 0, extraArguments: ["--worker-env", argument])
      #expect(run.status == 2, "\(argument): \(run.output)")
      #expect(run.stderr.contains("--worker-env") && run.stderr.contains(why), "\(argument): \(run.stderr)")
    }
  }
}
