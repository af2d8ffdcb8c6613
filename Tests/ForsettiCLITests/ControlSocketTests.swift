import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// The operator verbs ask the host running on a state directory, through `STATE/control.sock`,
/// instead of judging again with options the operator would have to repeat; with no host they
/// read and write the files, and say which. Every verb here runs as the real `forsetti-host`
/// binary, from a directory with no `manifests/`, so nothing can be found there by accident.
@Suite(.onTestThreads, .serialized) struct ControlSocketTests {
  let dir = TemporaryDirectory("control")

  var state: String { dir.url("state") }
  var manifests: String { dir.url("manifests") }
  var plugins: String { dir.url("plugins") }
  var socket: String { state + "/control.sock" }

  /// A working directory without `manifests/`: a verb run there knows only what it is told.
  var elsewhere: String {
    let path = dir.url("elsewhere")
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
  }

  // MARK: - Helpers

  /// A module that logs `hello from ID` when it starts and `bye from ID` when it stops.
  func module(
    _ id: String, type: String = "service", capabilities: [String] = [], product: String? = nil
  ) throws {
    let entry = (id.split(separator: ".").last.map(String.init) ?? "module") + "_entry"
    var f = ModuleFixture(moduleID: id, entryPoint: entry)
    f.type = type
    f.start = "fixture_log(\"hello from \(id)\"); return FORSETTI_OK;"
    f.stop = "fixture_log(\"bye from \(id)\");"
    try f.install(
      in: dir, name: entry, capabilities: capabilities,
      manifestExtra: product.map { #","iapProductID":"\#($0)""# } ?? "")
  }

  /// `forsetti-host VERB` on this directory with the host's own options, `--for 60` as a safety net.
  func launch(_ extra: [String] = [], verb: String = "run") throws -> DevHost {
    try DevHost.launch(
      [verb, "--manifests", manifests, "--plugins", plugins, "--state", state, "--for", "60"] + extra)
  }

  /// Waits until `host` publishes `expected` in runtime.json under its own pid.
  func published(_ expected: [String: String], by host: DevHost, timeout: Double = 60) -> RuntimeWait {
    LiveHost.wait(
      stateDirectory: state, pid: host.process.processIdentifier, for: expected, timeout: timeout,
      isRunning: { host.process.isRunning })
  }

  /// Waits for `host` to publish `expected` and for its control socket to appear. The socket is
  /// only expected, not required, so that a host without one still lets the verbs be tried.
  func ready(
    _ host: DevHost, _ expected: [String: String], sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    let w = published(expected, by: host)
    try #require(w.reached, why(w, host), sourceLocation: sourceLocation)
    #expect(
      LiveHost.awaitSocket(stateDirectory: state, isRunning: { host.process.isRunning }),
      "the running host made no \(socket)", sourceLocation: sourceLocation)
  }

  /// The wait and the host's last lines, for a failure message.
  func why(_ wait: RuntimeWait, _ host: DevHost) -> Comment {
    "\(wait)\nhost output (last 40 lines):\n\(host.lines.suffix(40).joined(separator: "\n"))"
  }

  /// Runs one `forsetti-host` verb to completion in `directory` (default: `elsewhere`), as the
  /// user running the tests or, with `uid`, as that user through `setpriv`.
  func cli(_ args: [String], in directory: String? = nil, as uid: UInt32? = nil) throws -> ProcessResult {
    let cwd = directory ?? elsewhere
    guard let uid else { return try HostBinary.run(args, in: cwd) }
    return try ProcessRunner.run(
      "/usr/bin/setpriv",
      ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", HostBinary.forOtherUsers] + args, in: cwd)
  }

  /// What a verb says on stderr when the host running on this state directory answered it.
  func answeredBy(_ host: DevHost) -> String {
    "answered by the host running on \(state) (pid \(host.process.processIdentifier))"
  }

  var readTheFiles: String { "no host is running on \(state); read from the files" }
  var wroteTheFiles: String { "no host is running on \(state); wrote the files" }

  /// A verb's whole result, for a failure message.
  func shown(_ r: ProcessResult) -> Comment {
    "status \(r.status)\nstdout:\n\(r.stdout)\nstderr:\n\(r.stderr)"
  }

  /// The line of a text `list` that names `moduleID`.
  func row(_ r: ProcessResult, _ moduleID: String) -> String {
    r.stdout.split(separator: "\n").map(String.init).first { $0.hasPrefix(moduleID + " ") } ?? ""
  }

  static func instant(_ t: Double) -> String {
    ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: t))
  }

  // MARK: - Reading verbs ask the running host

  /// The host was started with `--approve-all` and an entitlements file; `list` and `explain`
  /// given only `--state` report what that host decided, not what a fresh judgement without
  /// those options would (approvalPending, moduleLocked).
  @Test func listAndExplainAskTheRunningHostGivenOnlyTheState() throws {
    try module("com.test.needy", capabilities: ["storage"])
    try module("com.test.paid", product: "com.vendor.pro")
    let entitlements = dir.url("entitlements.json")
    try LiveHost.replaceFile(entitlements, with: #"{"unlockedProducts":["com.vendor.pro"]}"#)
    let host = try launch(["--approve-all", "--entitlements", entitlements])
    defer { host.stop() }
    try ready(host, ["com.test.needy": "started", "com.test.paid": "started"])

    // The socket is the host user's alone.
    var st = stat()
    #expect(lstat(socket, &st) == 0, "no \(socket)")
    #expect(st.st_mode & S_IFMT == S_IFSOCK, "\(socket) is not a socket")
    #expect(st.st_mode & 0o777 == 0o600, "mode \(String(st.st_mode & 0o777, radix: 8))")
    #expect(st.st_uid == geteuid())

    let list = try cli(["list", "--state", state])
    #expect(list.status == 0, shown(list))
    #expect(list.stderr.contains(answeredBy(host)), shown(list))
    for id in ["com.test.needy", "com.test.paid"] {
      let line = row(list, id)
      #expect(line.contains("pass") && line.contains("started"), "\(id): '\(line)'\n\(shown(list))")
    }
    #expect(!list.stdout.contains("approvalPending") && !list.stdout.contains("moduleLocked"), shown(list))

    let json = try cli(["list", "--state", state, "--json"])
    #expect(json.status == 0, shown(json))
    let modules = (try? JSONParser.parse(json.stdout))?.objectValue?["modules"]?.arrayValue ?? []
    let verdicts = modules.compactMap(\.objectValue).map {
      "\($0["moduleID"]?.stringValue ?? "?") \($0["verdict"]?.stringValue ?? "?") \($0["runState"]?.stringValue ?? "?")"
    }
    #expect(verdicts.sorted() == ["com.test.needy pass started", "com.test.paid pass started"], shown(json))

    let explain = try cli(["explain", "com.test.paid", "--state", state])
    #expect(explain.status == 0, shown(explain))
    #expect(explain.stderr.contains(answeredBy(host)), shown(explain))
    #expect(explain.stdout.contains("passes every gate evaluated"), shown(explain))
    #expect(explain.stdout.contains("entitlement: UNLOCKED"), shown(explain))
    #expect(explain.stdout.contains("started"), shown(explain))

    // An ID the host does not know is the verb's own usage error.
    let unknown = try cli(["explain", "com.test.nothere", "--state", state])
    #expect(unknown.status == 2, shown(unknown))
    #expect(host.process.isRunning)
  }

  // MARK: - Writing verbs go through the running host

  /// Started without `--approve-all`; every writing verb is given only `--state`, from a
  /// directory without manifests: the host knows its modules and applies each change at once.
  @Test func writingVerbsGoThroughTheRunningHost() throws {
    try module("com.test.needy", capabilities: ["storage"])
    try module("com.test.keeper")
    try module("com.test.uia", type: "ui")
    try module("com.test.uib", type: "ui")
    let host = try launch()
    defer { host.stop() }
    try ready(
      host,
      [
        "com.test.needy": "blocked/approvalPending", "com.test.keeper": "started", "com.test.uia": "started",
        "com.test.uib": "inactive/uiNotSelected",
      ])

    /// Runs one verb, expects the host to answer it with 0, then waits for `expected`.
    func step(
      _ args: [String], _ expected: [String: String], sourceLocation: SourceLocation = #_sourceLocation
    )
      throws
    {
      let r = try cli(args + ["--state", state])
      #expect(r.status == 0, shown(r), sourceLocation: sourceLocation)
      #expect(r.stderr.contains(answeredBy(host)), shown(r), sourceLocation: sourceLocation)
      let w = published(expected, by: host)
      #expect(w.reached, why(w, host), sourceLocation: sourceLocation)
    }

    try step(["approve", "com.test.needy"], ["com.test.needy": "started"])
    try step(["disable", "com.test.keeper"], ["com.test.keeper": "inactive/moduleDisabled"])
    try step(["enable", "com.test.keeper"], ["com.test.keeper": "started"])
    try step(
      ["select", "com.test.uib"], ["com.test.uib": "started", "com.test.uia": "inactive/uiNotSelected"])
    try step(["override", "module", "com.test.keeper", "off"], ["com.test.keeper": "blocked/moduleLocked"])
    // A persisted override stays persisted when the host writes it.
    let overrides = (try? String(contentsOfFile: state + "/overrides.json", encoding: .utf8)) ?? ""
    #expect(overrides.contains("com.test.keeper"), "overrides.json: \(overrides)")
    try step(["override", "module", "com.test.keeper", "clear"], ["com.test.keeper": "started"])
    try step(["revoke", "com.test.needy"], ["com.test.needy": "blocked/approvalPending"])

    let surface = try cli(["surface", "--state", state])
    #expect(surface.status == 0, shown(surface))
    #expect(surface.stderr.contains(answeredBy(host)), shown(surface))
  }

  // MARK: - In-memory overrides

  @Test func anInMemoryOverrideActsAtOnceAndDiesWithTheHost() throws {
    try module("com.test.paid", product: "com.vendor.pro")
    try module("com.test.keeper")
    let first = try launch()
    defer { first.stop() }
    try ready(first, ["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"])

    let on = try cli(["override", "module", "com.test.paid", "on", "--in-memory", "--state", state])
    #expect(on.status == 0, shown(on))
    #expect(on.stderr.contains(answeredBy(first)), shown(on))
    var w = published(["com.test.paid": "started", "com.test.keeper": "started"], by: first)
    #expect(w.reached, why(w, first))
    #expect(first.await("hello from com.test.paid", timeout: 60) != nil, "\(first.lines)")

    let list = try cli(["override", "list", "--state", state])
    #expect(list.status == 0, shown(list))
    #expect(list.stdout.contains("com.test.paid") && list.stdout.contains("in-memory"), shown(list))
    // Held by the host alone: nothing of it is written.
    let persisted = (try? String(contentsOfFile: state + "/overrides.json", encoding: .utf8)) ?? ""
    #expect(!persisted.contains("com.test.paid"), "overrides.json: \(persisted)")

    // off and clear, in memory too.
    let off = try cli(["override", "module", "com.test.keeper", "off", "--in-memory", "--state", state])
    #expect(off.status == 0, shown(off))
    w = published(["com.test.keeper": "blocked/moduleLocked"], by: first)
    #expect(w.reached, why(w, first))
    let clear = try cli(["override", "module", "com.test.keeper", "clear", "--in-memory", "--state", state])
    #expect(clear.status == 0, shown(clear))
    w = published(["com.test.keeper": "started", "com.test.paid": "started"], by: first)
    #expect(w.reached, why(w, first))

    // A new host on the same state has none of it.
    first.stop()
    let second = try launch()
    defer { second.stop() }
    try ready(second, ["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"])
    let after = try cli(["override", "list", "--state", state])
    #expect(after.status == 0, shown(after))
    #expect(after.stderr.contains(answeredBy(second)), shown(after))
    #expect(!after.stdout.contains("com.test.paid"), shown(after))
  }

  /// The running host answers from its own judge: a module it runs because an in-memory
  /// override forced it on is shown passing, with that override as the deciding input, never
  /// "BLOCKED by moduleLocked … in-memory: unset" beside "started" (issue 29).
  @Test func listAndExplainShowTheHostsInMemoryOverrideAsTheDecidingInput() throws {
    try module("com.test.paid", product: "com.vendor.pro")
    try module("com.test.keeper")
    let host = try launch()
    defer { host.stop() }
    try ready(host, ["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"])
    // Positive control: before the override, the host's own answer says locked.
    let before = try cli(["explain", "com.test.paid", "--state", state])
    #expect(before.status == 1 && before.stdout.contains("BLOCKED by moduleLocked"), shown(before))

    let on = try cli(["override", "module", "com.test.paid", "on", "--in-memory", "--state", state])
    #expect(on.status == 0, shown(on))
    let w = published(["com.test.paid": "started"], by: host)
    #expect(w.reached, why(w, host))

    let list = try cli(["list", "--state", state])
    #expect(list.status == 0 && list.stderr.contains(answeredBy(host)), shown(list))
    let row =
      list.stdout.split(separator: "\n").first { $0.hasPrefix("com.test.paid") }.map(String.init) ?? ""
    #expect(row.contains("pass (module override on from in-memory)"), shown(list))
    #expect(row.contains("started") && !row.contains("blocked"), shown(list))

    let json = try cli(["list", "--json", "--state", state])
    let doc = try #require(try? JSONParser.parse(json.stdout), shown(json))
    let paid = try #require(
      doc.objectValue?["modules"]?.arrayValue?.compactMap(\.objectValue).first {
        $0["moduleID"]?.stringValue == "com.test.paid"
      }, shown(json))
    #expect(paid["verdict"]?.stringValue == "pass" && paid["runState"]?.stringValue == "started", shown(json))
    let decided = paid["override"]?.objectValue
    #expect(
      decided?["provider"]?.stringValue == "in-memory" && decided?["state"]?.stringValue == "on", shown(json))
    let entitlement = paid["trace"]?.arrayValue?.compactMap(\.objectValue).first {
      $0["step"]?.stringValue == "entitlement"
    }
    #expect(entitlement?["detail"]?.stringValue == "module override on from in-memory", shown(json))

    let explain = try cli(["explain", "com.test.paid", "--state", state])
    #expect(explain.status == 0, shown(explain))
    #expect(explain.stdout.contains("passes every gate evaluated"), shown(explain))
    #expect(!explain.stdout.contains("BLOCKED"), shown(explain))
    #expect(explain.stdout.contains("UNLOCKED — module override on from in-memory"), shown(explain))
    #expect(explain.stdout.contains("module override, in-memory: on"), shown(explain))
    #expect(
      explain.stdout.contains("in the running host (pid \(host.process.processIdentifier)): started"),
      shown(explain))
    let explainJSON = try cli(["explain", "com.test.paid", "--json", "--state", state])
    let x = try #require(try? JSONParser.parse(explainJSON.stdout).objectValue, shown(explainJSON))
    #expect(
      x["entitlement"]?.objectValue?["decidedBy"]?.stringValue == "moduleOverride:in-memory",
      shown(explainJSON))
  }

  // MARK: - Time-frame overrides

  /// Two windows for one module are both kept: off inside each, on before, between and after.
  @Test func twoTimeFramesForOneModuleBothApply() throws {
    try module("com.test.windowed")
    try module("com.test.keeper")
    let host = try launch()
    defer { host.stop() }
    try ready(host, ["com.test.windowed": "started", "com.test.keeper": "started"])
    let pid = host.process.processIdentifier

    // Whole seconds: instants are written to the second.
    let t0 = (Date().timeIntervalSince1970 + 3).rounded(.up)
    let windows = [(t0, t0 + 2), (t0 + 4, t0 + 6)]
    for (from, until) in windows {
      let r = try cli([
        "override", "module", "com.test.windowed", "off", "--from", Self.instant(from), "--until",
        Self.instant(until), "--state", state,
      ])
      #expect(r.status == 0, shown(r))
      #expect(r.stderr.contains(answeredBy(host)), shown(r))
    }
    let list = try cli(["override", "list", "--state", state])
    #expect(list.status == 0, shown(list))
    for (from, until) in windows {
      #expect(
        list.stdout.contains(Self.instant(from)) && list.stdout.contains(Self.instant(until)), shown(list))
    }

    // Every change of the module's published state, and when it was first seen.
    var seen: [(at: Double, state: String)] = []
    // Until the fifth change is seen: the last edge is at t0 + 6, and a loaded machine may see the
    // start after it later; the minute is a safety net, never the verdict.
    while Date().timeIntervalSince1970 < t0 + 60 {
      if let s = RuntimeSnapshot.read(stateDirectory: state), s.pid == pid {
        let now = Date().timeIntervalSince1970
        let v = s["com.test.windowed"]
        if ["started", "blocked/moduleLocked"].contains(v), seen.last?.state != v { seen.append((now, v)) }
        if seen.count == 5 { break }
      }
      usleep(25_000)
    }
    let states = seen.map(\.state)
    #expect(
      states == ["started", "blocked/moduleLocked", "started", "blocked/moduleLocked", "started"],
      "windows \(windows): \(seen)\n\(host.lines.suffix(30).joined(separator: "\n"))")
    // Never early: no stop before a window opens, no start before it closes.
    let edges = [t0, t0 + 2, t0 + 4, t0 + 6]
    for (i, edge) in edges.enumerated() where i + 1 < seen.count {
      #expect(seen[i + 1].at >= edge, "change \(i + 1) seen at \(seen[i + 1].at), before \(edge): \(seen)")
    }
  }

  // MARK: - reload

  /// Builds `f` elsewhere and renames it over plugins/hot.so, with its manifest, as a deployment does.
  func deploy(_ f: ModuleFixture) throws {
    let so = try f.build(in: dir, as: "staging/\(UUID().uuidString).so")
    try LiveHost.replaceFile(manifests + "/hot.json", with: f.manifest())
    #expect(rename(so, plugins + "/hot.so") == 0)
  }

  /// Under `run`, which watches no binaries: `reload ID` saves the module's state, stops it and
  /// starts it again from the files as they are now.
  @Test func reloadStartsAModuleAgainFromTheFilesAsTheyAreNow() throws {
    try DevCommandTests.hot("v1").install(in: dir, name: "hot")
    let host = try launch(["--approve-all"])
    defer { host.stop() }
    try ready(host, ["com.test.hot": "started"])
    #expect(host.await("start v1") != nil, "\(host.lines)")

    // The same files: the state is carried (generation 1 from restore_state).
    var mark = host.lines.count
    let same = try cli(["reload", "com.test.hot", "--state", state])
    #expect(same.status == 0, shown(same))
    #expect(same.stdout.contains("reload com.test.hot 1.0.0 → 1.0.0: reloaded"), shown(same))
    #expect(same.stderr.contains(answeredBy(host)), shown(same))
    #expect(host.await("v1 generation 1", from: mark, timeout: 60) != nil, "\(host.lines)")

    // A new version on disk: `run` does not pick it up by itself …
    try deploy(DevCommandTests.hot("v2", version: (1, 0, 1)))
    usleep(500_000)
    #expect(
      !host.lines.contains { $0.contains("start v2") || $0.contains("v2 generation") }, "\(host.lines)")
    // … `reload` does, with the state.
    mark = host.lines.count
    let newer = try cli(["reload", "com.test.hot", "--state", state])
    #expect(newer.status == 0, shown(newer))
    #expect(newer.stdout.contains("reload com.test.hot 1.0.0 → 1.0.1: reloaded"), shown(newer))
    #expect(host.await("v2 generation 2", from: mark, timeout: 60) != nil, "\(host.lines)")

    // A version whose start fails: rolled back to the one that ran, with its state; exit 1.
    try deploy(DevCommandTests.hot("v3", start: "return FORSETTI_ERR_START_FAILED;", version: (1, 0, 2)))
    mark = host.lines.count
    let broken = try cli(["reload", "com.test.hot", "--state", state])
    #expect(broken.status == 1, shown(broken))
    #expect((broken.stdout + broken.stderr).lowercased().contains("rolled back"), shown(broken))
    #expect(host.await("v2 generation 3", from: mark, timeout: 60) != nil, "\(host.lines)")
    let w = published(["com.test.hot": "started"], by: host)
    #expect(w.reached, why(w, host))

    let unknown = try cli(["reload", "com.test.nothere", "--state", state])
    #expect(unknown.status == 2, shown(unknown))
    #expect(host.process.isRunning)
  }

  // MARK: - status

  @Test func statusExitsZeroWhileAHostRunsAndThreeWhenNone() throws {
    try module("com.test.one")
    try module("com.test.two")
    let none = try cli(["status", "--state", state])
    #expect(none.status == 3, shown(none))
    #expect((none.stdout + none.stderr).contains("not running"), shown(none))
    let noneJSON = try cli(["status", "--state", state, "--json"])
    #expect(noneJSON.status == 3, shown(noneJSON))
    #expect(
      (try? JSONParser.parse(noneJSON.stdout))?.objectValue?["running"] == .bool(false), shown(noneJSON))

    let host = try launch()
    defer { host.stop() }
    try ready(host, ["com.test.one": "started", "com.test.two": "started"])
    let pid = host.process.processIdentifier
    let running = try cli(["status", "--state", state])
    #expect(running.status == 0, shown(running))
    #expect(running.stdout.hasPrefix("running: pid \(pid), 2 modules started"), shown(running))
    let json = try cli(["status", "--state", state, "--json"])
    #expect(json.status == 0, shown(json))
    let o = (try? JSONParser.parse(json.stdout))?.objectValue
    #expect(o?["running"] == .bool(true), shown(json))
    #expect(o?["pid"]?.integerValue == Int(pid), shown(json))

    // Stopped: the runtime.json it leaves behind does not count as a running host.
    host.stop()
    let after = try cli(["status", "--state", state])
    #expect(after.status == 3, shown(after))
    #expect((after.stdout + after.stderr).contains("not running"), shown(after))
  }

  // MARK: - One host per state directory

  @Test func aSecondHostOnTheSameStateIsRefused() throws {
    try module("com.test.one")
    let first = try launch()
    defer { first.stop() }
    try ready(first, ["com.test.one": "started"])
    let pid = first.process.processIdentifier

    for verb in ["run", "dev"] {
      let second = try HostBinary.run([
        verb, "--manifests", manifests, "--plugins", plugins, "--state", state, "--for", "3",
      ])
      #expect(second.status == 2, "\(verb): \(shown(second))")
      #expect(
        second.stderr.contains("another host (pid \(pid)) is running on \(state)"),
        "\(verb): \(shown(second))")
      #expect(!second.stdout.contains("hello from"), "\(verb) started modules: \(shown(second))")
    }
    // The first is untouched: still running, still the one published, still answering.
    #expect(first.process.isRunning)
    let w = published(["com.test.one": "started"], by: first, timeout: 60)
    #expect(w.reached, why(w, first))
    let list = try cli(["list", "--state", state])
    #expect(list.stderr.contains(answeredBy(first)), shown(list))
    #expect(first.lines.filter { $0.hasSuffix("hello from com.test.one") }.count == 1, "\(first.lines)")
  }

  /// A host killed with SIGKILL leaves its socket and runtime.json behind; neither makes the
  /// verbs believe it runs, nor keeps the next host from starting.
  @Test func aKilledHostLeavesNothingThatBlocks() throws {
    try module("com.test.one")
    let first = try launch()
    defer { first.stop() }
    try ready(first, ["com.test.one": "started"])
    kill(first.process.processIdentifier, SIGKILL)
    first.process.waitUntilExit()

    let status = try cli(["status", "--state", state])
    #expect(status.status == 3, shown(status))
    let list = try cli(["list", "--state", state], in: dir.path)
    #expect(list.status == 0, shown(list))
    #expect(list.stderr.contains(readTheFiles), shown(list))

    let second = try launch()
    defer { second.stop() }
    try ready(second, ["com.test.one": "started"])
    let again = try cli(["list", "--state", state])
    #expect(again.stderr.contains(answeredBy(second)), shown(again))
  }

  // MARK: - Only the host's own user

  /// A client running as uid 65534 against a root host is refused whichever layer refuses it
  /// (the socket's mode, or the host's peer-credential check once the mode is opened up), and
  /// the host goes on as before.
  @Test func aClientOfAnotherUserIsRefused() throws {
    try #require(geteuid() == 0, "running a client as another user needs root")
    try module("com.test.paid", product: "com.vendor.pro")
    try module("com.test.keeper")
    let host = try launch()
    defer { host.stop() }
    try ready(host, ["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"])
    // The other user can reach the socket's directory, so only the host can refuse it.
    for path in [dir.path, state, elsewhere] { chmod(path, 0o755) }
    let nobody = HostileHost.nobody

    func refused(_ layer: String) throws {
      for args in [
        ["list", "--state", state], ["status", "--state", state],
        ["override", "module", "com.test.paid", "on", "--in-memory", "--state", state],
        ["reload", "com.test.keeper", "--state", state],
      ] {
        let r = try cli(args, as: nobody)
        #expect(r.status == 2, "\(layer): \(args): \(shown(r))")
        #expect(r.stderr.contains("only its own user"), "\(layer): \(args): \(shown(r))")
      }
    }
    try refused("socket mode")
    #expect(chmod(socket, 0o666) == 0, "chmod \(socket): errno \(errno)")
    try refused("peer credentials")

    // Unaffected: nothing started, stopped or reloaded, and its own user still gets answers.
    usleep(300_000)
    #expect(host.process.isRunning)
    let w = published(["com.test.paid": "blocked/moduleLocked", "com.test.keeper": "started"], by: host)
    #expect(w.reached, why(w, host))
    #expect(!host.lines.contains { $0.contains("hello from com.test.paid") }, "\(host.lines)")
    #expect(!host.lines.contains { $0.contains("bye from com.test.keeper") }, "\(host.lines)")
    let own = try cli(["list", "--state", state])
    #expect(own.stderr.contains(answeredBy(host)), shown(own))
  }

  // MARK: - No host: the files, and saying so

  /// A verb run with no host on the state directory, what it must exit with, and the file it writes.
  struct Fallback: Sendable, CustomStringConvertible {
    var args: [String]
    var status: Int32
    var writes: String?
    var description: String { args.joined(separator: " ") }
  }

  static let readers = [
    Fallback(args: ["list"], status: 0),
    Fallback(args: ["explain", "com.test.svc"], status: 0),
    Fallback(args: ["surface"], status: 1),
    Fallback(args: ["override", "list"], status: 0),
  ]

  static let writers = [
    Fallback(args: ["approve", "com.test.svc"], status: 0, writes: "approvals.json"),
    Fallback(args: ["revoke", "com.test.svc"], status: 0, writes: "approvals.json"),
    Fallback(args: ["override", "module", "com.test.svc", "off"], status: 0, writes: "overrides.json"),
    Fallback(args: ["enable", "com.test.svc"], status: 0, writes: "activation.json"),
    Fallback(args: ["disable", "com.test.svc"], status: 0, writes: "activation.json"),
    Fallback(args: ["select", "com.test.ui"], status: 0, writes: "activation.json"),
    Fallback(args: ["select", "--none"], status: 0, writes: "activation.json"),
  ]

  /// Modules and a state directory, and no host: run from `dir`, where `manifests/` is the default.
  func noHost() throws {
    try module("com.test.svc")
    try module("com.test.ui", type: "ui")
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
  }

  @Test(arguments: readers) func aReadingVerbWithNoHostReadsTheFilesAndSaysSo(_ v: Fallback) throws {
    try noHost()
    let r = try cli(v.args + ["--state", state], in: dir.path)
    #expect(r.status == v.status, shown(r))
    #expect(r.stderr.contains(readTheFiles), shown(r))
  }

  @Test(arguments: writers) func aWritingVerbWithNoHostWritesTheFilesAndSaysSo(_ v: Fallback) throws {
    try noHost()
    let r = try cli(v.args + ["--state", state], in: dir.path)
    #expect(r.status == v.status, shown(r))
    #expect(r.stderr.contains(wroteTheFiles), shown(r))
    if let file = v.writes {
      #expect(FileManager.default.fileExists(atPath: state + "/" + file), "no \(file): \(shown(r))")
    }
  }

  @Test func reloadAndInMemoryOverridesNeedARunningHost() throws {
    try noHost()
    let reload = try cli(["reload", "com.test.svc", "--state", state], in: dir.path)
    #expect(reload.status == 2, shown(reload))
    #expect(reload.stderr.contains("reload needs a running host"), shown(reload))

    for action in ["on", "off", "clear"] {
      let r = try cli(
        ["override", "module", "com.test.svc", action, "--in-memory", "--state", state], in: dir.path)
      #expect(r.status == 2, shown(r))
      #expect(r.stderr.contains("no host is running on \(state)"), shown(r))
    }
    // Nothing was written in its place.
    #expect(!FileManager.default.fileExists(atPath: state + "/overrides.json"))
  }
}
