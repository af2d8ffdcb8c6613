import ForsettiCore
import ForsettiTestSupport
import Foundation
import Synchronization
import Testing

/// A real `forsetti-host dev` process while real .so files are replaced under it.
final class DevHost: Sendable {
  let process: Process
  private let output = LineBuffer()
  /// Standard error on its own, when launched with `separateErrors`; else it is in `lines`.
  private let errors = LineBuffer()

  /// Any verb, e.g. `run`.
  static func launch(_ args: [String], separateErrors: Bool = false) throws -> DevHost {
    try DevHost(args, verb: nil, separateErrors: separateErrors)
  }

  convenience init(_ args: [String]) throws { try self.init(args, verb: "dev") }

  init(
    _ args: [String], verb: String?, executable: String = HostBinary.path, in directory: String? = nil,
    separateErrors: Bool = false
  ) throws {
    process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = (verb.map { [$0] } ?? []) + args
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let pipe = Pipe()
    process.standardOutput = pipe
    let errorPipe = separateErrors ? Pipe() : pipe
    process.standardError = errorPipe
    try process.run()
    Self.pump(pipe.fileHandleForReading, into: output)
    if separateErrors { Self.pump(errorPipe.fileHandleForReading, into: errors) }
  }

  /// Reads `handle` to its end on a thread of its own, a line at a time into `buffer`.
  private static func pump(_ handle: FileHandle, into buffer: LineBuffer) {
    Thread {
      var pending = Data()
      while true {
        let chunk = handle.availableData
        if chunk.isEmpty { return }
        pending.append(chunk)
        while let nl = pending.firstIndex(of: 0x0A) {
          let line = String(decoding: pending[pending.startIndex..<nl], as: UTF8.self)
          pending.removeSubrange(pending.startIndex...nl)
          buffer.value.withLock { $0.append(line) }
        }
      }
    }.start()
  }

  var lines: [String] { output.value.withLock { $0 } }
  /// Standard error's lines when launched with `separateErrors`, else none.
  var errorLines: [String] { errors.value.withLock { $0 } }

  /// The first line after index `from` containing `text`, waiting up to `timeout` seconds (a
  /// safety net, generous so that a loaded machine makes the wait longer, not the verdict).
  func await(_ text: String, from: Int = 0, timeout: Double = 60) -> (Int, String)? {
    awaitAny([text], from: from, timeout: timeout, in: { self.lines })
  }

  /// The first line of `stream` after index `from` containing any of `texts`, waiting up to
  /// `timeout` seconds.
  func awaitAny(
    _ texts: [String], from: Int = 0, timeout: Double = 60, in stream: (() -> [String])? = nil
  ) -> (Int, String)? {
    let read = stream ?? { self.lines }
    let end = Date().addingTimeInterval(timeout)
    while Date() < end {
      let l = read()
      if from < l.count,
        let i = l[from...].firstIndex(where: { line in texts.contains { line.contains($0) } })
      {
        return (i, l[i])
      }
      usleep(10_000)
    }
    return nil
  }

  func stop() {
    if process.isRunning {
      kill(process.processIdentifier, SIGTERM)
      process.waitUntilExit()
    }
  }
}

final class LineBuffer: Sendable {
  let value = Mutex<[String]>([])
}

@Suite(.onTestThreads, .serialized) struct DevCommandTests {
  let dir = TemporaryDirectory("dev")

  /// A module that counts its generations through save/restore.
  static func hot(
    _ tag: String, start: String? = nil, entry: String = "hot_entry", version: (Int, Int, Int) = (1, 0, 0)
  )
    -> ModuleFixture
  {
    var f = ModuleFixture(moduleID: "com.test.hot", entryPoint: entry)
    f.version = version
    f.prelude = """
      static int generation;
      static forsetti_status fx_save(void *self, forsetti_state_writer w, void *ctx) {
        (void)self; char b[16]; int n = snprintf(b, sizeof b, "%d", generation); return w(ctx, b, (size_t)n);
      }
      static forsetti_status fx_restore(void *self, const void *p, size_t n) {
        (void)self; char b[16] = {0}; memcpy(b, p, n < 15 ? n : 15); generation = atoi(b) + 1;
        char line[64]; snprintf(line, sizeof line, "\(tag) generation %d", generation); fixture_log(line); return FORSETTI_OK;
      }
      """
    f.start = start ?? "fixture_log(\"start \(tag)\"); return FORSETTI_OK;"
    f.tableExtra = ".save_state = fx_save, .restore_state = fx_restore,"
    return f
  }

  /// Builds `f` elsewhere and renames it over plugins/hot.so, as a build tool's final step does.
  func replace(_ f: ModuleFixture, as name: String = "hot.so") throws {
    let tmp = try f.build(in: dir, as: "staging/\(UUID().uuidString).so")
    #expect(rename(tmp, dir.url("plugins/\(name)")) == 0)
  }

  func launch(debounce: String = "50", grace: String = "1") throws -> DevHost {
    let host = try DevHost([
      "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", dir.url("state"),
      "--approve-all",
      "--debounce", debounce, "--grace", grace,
    ])
    #expect(host.await("for changes") != nil)
    return host
  }

  @Test func stateIsCarriedAndBrokenBuildsRollBack() throws {
    try Self.hot("v1").install(in: dir, name: "hot")
    // A grace period far beyond v5's crash 100 ms after its start: on a loaded machine that
    // sleep can end a second late, and the crash must still fall inside the grace period.
    let host = try launch(grace: "5")
    defer { host.stop() }
    #expect(host.await("start v1") != nil)

    // A version bump: manifest and binary change together, one reload, state carried.
    let v2 = try Self.hot("v2", version: (1, 0, 1)).build(in: dir, as: "staging/v2.so")
    try dir.write("manifests/hot.json", Self.hot("v2", version: (1, 0, 1)).manifest())
    #expect(rename(v2, dir.url("plugins/hot.so")) == 0)
    let reloaded = host.await("reload com.test.hot 1.0.0 → 1.0.1: reloaded, 1 bytes of state carried")
    #expect(reloaded != nil, "\(host.lines)")
    #expect(host.await("v2 generation 1") != nil, "\(host.lines.joined(separator: "\n"))")
    var mark = host.lines.count

    // start fails → rolled back, the previous version runs again with its state.
    try replace(Self.hot("v3", start: "return FORSETTI_ERR_START_FAILED;", version: (1, 0, 1)))
    #expect(host.await("ROLLED BACK (startFailed)", from: mark) != nil, "\(host.lines)")
    #expect(host.await("v2 generation 2", from: mark) != nil)
    mark = host.lines.count

    // A crash in start → rolled back.
    try replace(
      Self.hot("v4", start: "volatile int *p = NULL; *p = 1; return FORSETTI_OK;", version: (1, 0, 1)))
    #expect(host.await("ROLLED BACK (crashed)", from: mark) != nil, "\(host.lines)")
    #expect(host.await("v2 generation 3", from: mark) != nil)
    mark = host.lines.count

    // A crash soon after start (within the grace period) → rolled back.
    let later = "pthread_t t; pthread_create(&t, NULL, boom, NULL); pthread_detach(t); return FORSETTI_OK;"
    var v5 = Self.hot("v5", start: later, version: (1, 0, 1))
    v5.prelude =
      "#include <pthread.h>\nstatic void *boom(void *a) { (void)a; usleep(100000); abort(); return NULL; }\n"
      + v5.prelude
    try replace(v5)
    #expect(host.await("ROLLED BACK (crashed)", from: mark) != nil, "\(host.lines)")
    #expect(host.await("v2 generation 4", from: mark) != nil)
    mark = host.lines.count

    // The entry point is gone → rejected before anything stops.
    try replace(Self.hot("v6", entry: "other_entry", version: (1, 0, 1)))
    #expect(host.await("rejected (binaryNotFound)", from: mark) != nil, "\(host.lines)")
    mark = host.lines.count

    // A truncated file → rejected by inspection, never loaded.
    let good = try Self.hot("v7", version: (1, 0, 1)).build(in: dir, as: "staging/full.so")
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: good)))
    try dir.write("staging/half.so", bytes: Array(bytes.prefix(bytes.count / 2)))
    #expect(rename(dir.url("staging/half.so"), dir.url("plugins/hot.so")) == 0)
    #expect(host.await("rejected (invalidBinary)", from: mark) != nil, "\(host.lines)")
    mark = host.lines.count

    // Through all of it the last good version kept serving: no stop since v2's rollback start.
    let runtime = try #require(
      try JSONParser.parse(String(contentsOfFile: dir.url("state/runtime.json"), encoding: .utf8)).objectValue
    )
    let module = runtime["modules"]?.arrayValue?.compactMap(\.objectValue).first {
      $0["moduleID"]?.stringValue == "com.test.hot"
    }
    #expect(module?["state"]?.stringValue == "started")

    // And a good build after the broken ones reloads with the state intact.
    #expect(rename(good, dir.url("plugins/hot.so")) == 0)
    #expect(host.await("reloaded, 1 bytes of state carried", from: mark) != nil, "\(host.lines)")
    #expect(host.await("v7 generation 5", from: mark) != nil)
  }

  /// `dev` keeps a worker process started ahead of need: the reloaded version runs in a process
  /// that already existed before the change, not in one started for it.
  @Test func aReloadIsServedByAWorkerStartedBeforeTheChange() throws {
    let logPID =
      "char l[64]; snprintf(l, sizeof l, \"serving pid %d\", (int)getpid()); fixture_log(l); return FORSETTI_OK;"
    try Self.hot("p1", start: logPID).install(in: dir, name: "hot")
    let host = try launch()
    defer { host.stop() }
    let first = try #require(host.await("serving pid "), "\(host.lines)")
    var before: [pid_t] = []
    for _ in 0..<200 {
      before = RunCommandTests.workers(of: host.process.processIdentifier)
      if before.count >= 2 { break }
      usleep(20_000)
    }
    #expect(before.count == 2, "the serving worker and one spare: \(before)")
    // Each worker holds its own channels (0-4) and nothing of another's: past them, no pipe or
    // socket the host or the other worker holds too (its own, such as the crash handler's
    // stack-copy pipe, are its business).
    func shared(_ pid: pid_t) -> Set<String> {
      let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
      return Set(
        fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)") }
          .filter { $0.hasPrefix("pipe:") || $0.hasPrefix("socket:") })
    }
    for worker in before {
      // Until its exec (or, forked by the zygote, until it has closed the zygote's descriptors
      // and says `--worker`), a child still holds its parent's table: wait for that.
      for _ in 0..<100 {
        let argv = (try? String(contentsOfFile: "/proc/\(worker)/cmdline", encoding: .utf8)) ?? ""
        if argv.contains("config") || argv.contains("--worker") { break }
        usleep(10_000)
      }
      let others = ([host.process.processIdentifier] + before.filter { $0 != worker }).map(shared)
      let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(worker)/fd")) ?? []
      for fd in fds.compactMap({ Int($0) }) where fd > 4 {
        let target =
          (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(worker)/fd/\(fd)")) ?? ""
        #expect(
          !others.contains { $0.contains(target) },
          "worker \(worker) fd \(fd) → \(target), held elsewhere too")
      }
    }
    let mark = host.lines.count
    try replace(Self.hot("p2", start: logPID))
    #expect(host.await("reload com.test.hot 1.0.0 → 1.0.0: reloaded", from: mark) != nil, "\(host.lines)")
    let (_, line) = try #require(host.await("serving pid ", from: mark), "\(host.lines)")
    let pid = try #require(line.split(separator: " ").last.flatMap { pid_t($0) }, "\(line)")
    #expect(
      before.contains(pid), "pid \(pid) was not among the host's processes before the change: \(before)")
    #expect(!first.1.hasSuffix(" \(pid)"))

    // A spare killed from outside is not the module's crash: the next reload gets a worker of
    // its own and nothing counts towards quarantine.
    var spare: pid_t?
    for _ in 0..<200 {
      spare = RunCommandTests.workers(of: host.process.processIdentifier).first { $0 != pid }
      if spare != nil { break }
      usleep(20_000)
    }
    let killed = try #require(spare, "no new spare after the reload")
    kill(killed, SIGKILL)
    let mark2 = host.lines.count
    try replace(Self.hot("p3", start: logPID))
    #expect(host.await("reload com.test.hot 1.0.0 → 1.0.0: reloaded", from: mark2) != nil, "\(host.lines)")
    let (_, third) = try #require(host.await("serving pid ", from: mark2), "\(host.lines)")
    #expect(!third.hasSuffix(" \(killed)"))
    #expect(!host.lines[mark2...].contains { $0.contains("crashed") }, "\(host.lines[mark2...])")
  }

  @Test func aBurstOfWritesGivesOneReload() throws {
    try Self.hot("v1").install(in: dir, name: "hot")
    // Five renames back to back are microseconds apart when idle; 500 ms of debounce keeps them
    // one burst even when a loaded machine preempts this test between two of them.
    let host = try launch(debounce: "500")
    defer { host.stop() }
    #expect(host.await("start v1") != nil)
    // Built first, then moved into place back to back, as a build writing many files does.
    let built = try (0..<5).map { n in try Self.hot("burst\(n)").build(in: dir, as: "staging/burst\(n).so") }
    let mark = host.lines.count
    for path in built { #expect(rename(path, dir.url("plugins/hot.so")) == 0) }
    let (first, _) = try #require(host.await("reload com.test.hot", from: mark), "\(host.lines[mark...])")
    #expect(host.await("burst4 generation 1", from: mark) != nil)
    // Positive control instead of a quiet window: one more change, made after the burst, is
    // reloaded on its own; its reload line coming after exactly one for the burst proves the
    // host had finished with the burst (a second reload of it would have come first).
    let after = try Self.hot("after").build(in: dir, as: "staging/after.so")
    #expect(rename(after, dir.url("plugins/hot.so")) == 0)
    #expect(host.await("after generation 2", from: mark) != nil, "\(host.lines[mark...])")
    // The reload line is written once the reload is done, after the module's own lines.
    #expect(host.await("reload com.test.hot", from: first + 1) != nil, "\(host.lines[mark...])")
    let reloads = host.lines[mark...].filter { $0.contains("reload com.test.hot") }
    #expect(reloads.count == 2, "one reload for the burst, one for the change after it: \(reloads)")
  }

  @Test func dependentsRestartAfterTheirProvider() throws {
    var provider = ModuleFixture(moduleID: "com.test.zauth", entryPoint: "auth_entry")
    provider.start = "fixture_log(\"auth up\"); return FORSETTI_OK;"
    provider.stop = "fixture_log(\"auth down\");"
    try provider.install(
      in: dir, name: "auth", capabilities: ["authentication"],
      manifestExtra: #","defaultModuleRole":"authentication""#)
    var consumer = ModuleFixture(moduleID: "com.test.aapp", entryPoint: "app_entry")
    consumer.start = "fixture_log(\"app up\"); return FORSETTI_OK;"
    consumer.stop = "fixture_log(\"app down\");"
    try consumer.install(
      in: dir, name: "app",
      manifestExtra:
        #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"private_to_module","requiredDefaultRoles":["authentication"]}}"#
    )
    let host = try launch()
    defer { host.stop() }
    #expect(host.await("app up") != nil)
    let mark = host.lines.count
    provider.start = "fixture_log(\"auth up again\"); return FORSETTI_OK;"
    let tmp = try provider.build(in: dir, as: "staging/auth.so")
    #expect(rename(tmp, dir.url("plugins/auth.so")) == 0)
    let restarted = try #require(
      host.await(
        "reload com.test.aapp 1.0.0 → 1.0.0: restarted after its provider com.test.zauth", from: mark),
      "\(host.lines)")
    let events = host.lines[mark...restarted.0].compactMap { l -> String? in
      for e in ["app down", "auth down", "auth up again", "app up"] where l.hasSuffix("] \(e)") { return e }
      return nil
    }
    #expect(events == ["app down", "auth down", "auth up again", "app up"])
  }

  @Test func addedCapabilitiesWaitForApproval() throws {
    try Self.hot("v1").install(in: dir, name: "hot")
    let host = try launch()
    defer { host.stop() }
    #expect(host.await("start v1") != nil)
    let mark = host.lines.count
    try dir.write("manifests/hot.json", Self.hot("v2").manifest(capabilities: ["networking"]))
    #expect(
      host.await("not reloaded: approval pending for networking", from: mark) != nil,
      "\(host.lines.joined(separator: "\n"))")
    #expect(!host.lines[mark...].contains { $0.contains("start v2") || $0.contains("v2 generation") })
  }
}
