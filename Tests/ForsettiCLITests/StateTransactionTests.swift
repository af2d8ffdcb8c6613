import ForsettiTestSupport
import Foundation
import Synchronization
import Testing

/// Every change to a state directory is one transaction (`STATE/state.lock`, durable write):
/// whatever runs at once and whatever is killed when, a change the command line acknowledged
/// (exit 0) is on disk afterwards. Writers are real `forsetti-host` processes of every writing
/// verb, each changing something no other writer touches, so any lost update shows.
@Suite(.onTestThreads, .serialized, .timeLimit(.minutes(5))) struct StateTransactionTests {
  let dir = TemporaryDirectory("txn")

  var state: String { dir.url("state") }
  var manifests: String { dir.url("manifests") }
  var plugins: String { dir.url("plugins") }

  /// Writer processes at a time: enough to contend, few enough for a 2-core machine.
  static let width = 24

  // MARK: - Writes and what each leaves on disk

  /// One writer: its command line and what it must leave on disk once it exited 0.
  struct Write: Sendable {
    enum Effect: Sendable {
      case override(channel: String, id: String, state: String)
      case approved(String)
      case revoked(String)
      case enabled(String)
      case disabled(String)
      case trusted(name: String, key: String)
    }
    var arguments: [String]
    var effect: Effect
    /// Whether a running host answers it (trust is always done on the files).
    var served: Bool { if case .trusted = effect { false } else { true } }
  }

  /// The state files as a user would read them after the run.
  struct Disk {
    var overrides: [String: [String: String]] = [:]
    var approved: [String: [String]] = [:]
    var enabled: Set<String> = []
    var disabled: Set<String> = []
    var keys: [String: String] = [:]
    /// Files that exist but are not JSON (never expected: a rename replaces a file whole).
    var unreadable: [String] = []

    init(_ state: String) {
      func object(_ name: String) -> [String: Any]? {
        let path = state + "/" + name
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        guard let o = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
          unreadable.append(name)
          return nil
        }
        return o
      }
      if let o = object("overrides.json") {
        for channel in ["modules", "products"] {
          for (id, v) in o[channel] as? [String: Any] ?? [:] {
            overrides[channel, default: [:]][id] = (v as? [String: Any])?["state"] as? String
          }
        }
      }
      if let o = object("approvals.json") {
        for (id, v) in o["modules"] as? [String: Any] ?? [:] {
          approved[id] = (v as? [String: Any])?["capabilities"] as? [String] ?? []
        }
      }
      if let o = object("activation.json") {
        enabled = Set(o["enabled"] as? [String] ?? [])
        disabled = Set(o["disabled"] as? [String] ?? [])
      }
      let keyDir = state + "/trusted-keys/licences"
      for name in (try? FileManager.default.contentsOfDirectory(atPath: keyDir)) ?? [] {
        keys[name] = try? String(contentsOfFile: keyDir + "/" + name, encoding: .utf8)
      }
    }

    /// Whether `effect` is on disk.
    func holds(_ effect: Write.Effect) -> Bool {
      switch effect {
      case .override(let channel, let id, let s): overrides[channel + "s"]?[id] == s
      case .approved(let id): approved[id] == ["storage"]
      case .revoked(let id): approved[id] == nil || approved[id] == []
      case .enabled(let id): enabled.contains(id)
      case .disabled(let id): disabled.contains(id)
      case .trusted(let name, let key): keys[name] == key
      }
    }
  }

  /// Manifests and keys for `writes` distinct changes of every verb, the approvals that the
  /// revokes withdraw already stored; returns the writes, shuffled. `overrides` more module and
  /// product overrides (distinct IDs) fill the list.
  func fixture(each n: Int, overrides: Int) throws -> [Write] {
    func manifest(_ id: String, type: String) throws {
      try dir.write(
        "manifests/\(id).json",
        """
        {"schemaVersion":"1.0","moduleID":"com.t.\(id)","displayName":"\(id)",
         "moduleVersion":{"major":1,"minor":0,"patch":0},"moduleType":"\(type)",
         "supportedPlatforms":["linux"],"minForsettiVersion":{"major":0,"minor":1,"patch":0},
         "capabilitiesRequested":["storage"],"entryPoint":"\(id)_entry"}
        """)
    }
    try FileManager.default.createDirectory(atPath: plugins, withIntermediateDirectories: true)
    let common = ["--state", state, "--manifests", manifests]
    var out: [Write] = []
    var revoked: [String] = []
    for i in 0..<n {
      for (verb, prefix) in [("approve", "a"), ("enable", "e"), ("disable", "d"), ("select", "u")] {
        let id = "\(prefix)\(i)"
        try manifest(id, type: verb == "select" ? "ui" : "service")
        let m = "com.t.\(id)"
        let effect: Write.Effect =
          switch verb {
          case "approve": .approved(m)
          case "disable": .disabled(m)
          default: .enabled(m)  // select enables the module it selects
          }
        out.append(Write(arguments: [verb, m] + common, effect: effect))
      }
      revoked.append("com.t.r\(i)")
      out.append(Write(arguments: ["revoke", "com.t.r\(i)"] + common, effect: .revoked("com.t.r\(i)")))
      let key = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() + "\n"
      let file = try dir.write("keys/k\(i).pub", key)
      out.append(
        Write(
          arguments: ["trust", file, "--for", "licences", "--state", state],
          effect: .trusted(name: "k\(i).pub", key: key)))
    }
    let stored = revoked.map { "\"\($0)\":{\"capabilities\":[\"storage\"]}" }.joined(separator: ",")
    try dir.write("state/approvals.json", "{\"version\":1,\"modules\":{\(stored)}}\n")
    for i in 0..<overrides {
      let (channel, state) = i % 3 == 0 ? ("module", "off") : ("product", "on")
      out.append(
        Write(
          arguments: ["override", "--state", self.state, "--", channel, "x\(i)", state],
          effect: .override(channel: channel, id: "x\(i)", state: state)))
    }
    return out.shuffled()
  }

  // MARK: - Running writers

  /// How one writer ended: its exit status (nil when a signal killed it) and standard error.
  struct Outcome: Sendable {
    var status: Int32?
    var stderr: String
    var acknowledged: Bool { status == 0 }
    var byHost: Bool { stderr.contains("answered by the host") }
    var busy: Bool { status != 0 && stderr.contains("busy") }
  }

  /// The writer processes running now, for the kill storm to pick from.
  final class Running: Sendable {
    let pids = Mutex<Set<Int32>>([])
  }

  /// Runs `forsetti-host arguments` to its end, registering its pid in `running` meanwhile.
  /// Standard error goes to a file, not a pipe: a pipe's end inherited by a process started
  /// meanwhile on another thread (a host living for minutes) would hold its reader until then.
  static func write(_ arguments: [String], running: Running, executable: String = HostBinary.path) -> Outcome
  {
    let errPath = NSTemporaryDirectory() + "txn-writer-\(UUID().uuidString).err"
    guard FileManager.default.createFile(atPath: errPath, contents: nil),
      let err = FileHandle(forWritingAtPath: errPath)
    else { return Outcome(status: nil, stderr: "cannot create \(errPath)") }
    defer { unlink(errPath) }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    p.standardOutput = FileHandle.nullDevice
    p.standardError = err
    do { try p.run() } catch {
      try? err.close()
      return Outcome(status: nil, stderr: "cannot start: \(error)")
    }
    try? err.close()
    let pid = p.processIdentifier
    running.pids.withLock { _ = $0.insert(pid) }
    p.waitUntilExit()
    running.pids.withLock { _ = $0.remove(pid) }
    let text = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return Outcome(status: p.terminationReason == .exit ? p.terminationStatus : nil, stderr: text)
  }

  /// Runs `count` jobs on `width` threads, each taking the next index, and waits for all.
  static func pool(_ count: Int, width: Int, _ job: @escaping @Sendable (Int) -> Void) {
    let next = Mutex(0)
    let group = DispatchGroup()
    for _ in 0..<width {
      group.enter()
      Thread {
        while true {
          let i: Int = next.withLock { n in
            defer { n += 1 }
            return n
          }
          guard i < count else { break }
          job(i)
        }
        group.leave()
      }.start()
    }
    group.wait()
  }

  /// The writes acknowledged (exit 0) whose change is not on disk.
  func lost(_ writes: [Write], _ outcomes: [Outcome?]) -> [String] {
    let disk = Disk(state)
    var out = disk.unreadable.map { "\($0) is not JSON" }
    for (w, o) in zip(writes, outcomes) where o?.acknowledged == true && !disk.holds(w.effect) {
      out.append("\(w.arguments.prefix(5).joined(separator: " ")) → \(w.effect) missing")
    }
    return out
  }

  func tally(_ outcomes: [Outcome?]) -> String {
    let done = outcomes.compactMap { $0 }
    let failed = done.filter { $0.status != 0 && !$0.busy }
    let why = Set(
      failed.map { o in
        o.status == nil
          ? "killed"
          : "exit \(o.status ?? 0): " + String(o.stderr.split(separator: "\n").last?.suffix(90) ?? "")
      })
    return
      "\(done.filter(\.acknowledged).count) acknowledged (\(done.filter { $0.acknowledged && $0.byHost }.count) by the host), \(done.filter(\.busy).count) refused busy, \(failed.count) failed or killed \(why.sorted().prefix(4))"
  }

  /// `forsetti-host run` on the fixture, up when `status` is answered by it.
  func host() throws -> DevHost {
    let h = try DevHost.launch(
      ["run", "--manifests", manifests, "--plugins", plugins, "--state", state, "--for", "600"])
    let end = Date().addingTimeInterval(60)
    while Date() < end && h.process.isRunning {
      let r = try HostBinary.run(["status", "--state", state])
      if r.stderr.contains("(pid \(h.process.processIdentifier))") { return h }
      usleep(20_000)
    }
    h.stop()
    throw HostDidNotAnswer(lines: h.lines)
  }

  struct HostDidNotAnswer: Error { var lines: [String] }

  // MARK: - Tests

  /// The lock is real: a writer waits while another holds `STATE/state.lock` (it changes
  /// nothing meanwhile) and completes once the lock is released.
  @Test func aWriterWaitsForTheStateLock() throws {
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    let fd = open(state + "/state.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    #expect(fd >= 0)
    #expect(flock(fd, LOCK_EX) == 0)
    let running = Running()
    let result = Mutex<Outcome?>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread {
      let o = Self.write(["override", "--state", state, "--", "product", "waiting", "on"], running: running)
      result.withLock { $0 = o }
      done.signal()
    }.start()
    // Wait for the writer to be blocked on the lock (a waiter in /proc/locks, "->"), not a time.
    var blocked = false
    let end = Date().addingTimeInterval(60)
    while !blocked && Date() < end {
      let pids = running.pids.withLock { $0 }
      let locks = (try? String(contentsOfFile: "/proc/locks", encoding: .utf8)) ?? ""
      blocked = locks.split(separator: "\n").contains { line in
        line.contains("->") && pids.contains { line.contains(" \($0) ") }
      }
      if !blocked { usleep(5_000) }
    }
    #expect(blocked, "the writer never waited on state.lock")
    #expect(Disk(state).overrides["products"]?["waiting"] == nil, "written while the lock was held")
    close(fd)
    done.wait()
    let o = result.withLock { $0 }
    #expect(o?.status == 0, "\(o?.stderr ?? "")")
    #expect(Disk(state).overrides["products"]?["waiting"] == "on")
    #expect(FileManager.default.fileExists(atPath: state + "/state.lock"))
  }

  /// An unprivileged user's writers on its own state directory, where root already wrote (so
  /// `state.lock` is root's, mode 0644, and the user can only read it): every writer still
  /// takes the lock (read-only is enough for `flock`), exits 0, and no change is lost.
  @Test func writersAsAnotherUserShareARootCreatedLock() throws {
    guard geteuid() == 0 else { return }
    chmod(dir.path, 0o755)
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    #expect(chown(state, HostileHost.nobody, HostileHost.nobody) == 0)
    let first = try HostBinary.run(["override", "--state", state, "--", "product", "byroot", "on"])
    #expect(first.status == 0, "\(first.stderr)")
    var st = stat()
    #expect(stat(state + "/state.lock", &st) == 0 && st.st_uid == 0 && st.st_mode & 0o777 == 0o644)
    let n = 48
    let outcomes = Mutex<[Outcome?]>(Array(repeating: nil, count: n))
    let running = Running()
    Self.pool(n, width: 16) { i in
      let o = Self.write(
        [
          "--reuid", "\(HostileHost.nobody)", "--regid", "\(HostileHost.nobody)", "--clear-groups",
          HostBinary.forOtherUsers, "override", "--state", state, "--", "product", "n\(i)", "on",
        ], running: running, executable: "/usr/bin/setpriv")
      outcomes.withLock { $0[i] = o }
    }
    let all = outcomes.withLock { $0 }
    let disk = Disk(state)
    for (i, o) in all.enumerated() {
      #expect(o?.status == 0, "\(o?.stderr ?? "")")
      #expect(disk.overrides["products"]?["n\(i)"] == "on", "n\(i) lost")
    }
    #expect(disk.overrides["products"]?["byroot"] == "on")
    #expect(stat(state + "/overrides.json", &st) == 0 && st.st_uid == HostileHost.nobody)
  }

  /// 200 writers of every writing verb, no host: every one exits 0 and every change is there.
  @Test func twoHundredWritersOnTheFiles() throws {
    let writes = try fixture(each: 10, overrides: 140)
    #expect(writes.count == 200)
    let outcomes = Mutex<[Outcome?]>(Array(repeating: nil, count: writes.count))
    let running = Running()
    Self.pool(writes.count, width: Self.width) { i in
      let o = Self.write(writes[i].arguments, running: running)
      outcomes.withLock { $0[i] = o }
    }
    let all = outcomes.withLock { $0 }
    for (w, o) in zip(writes, all) {
      #expect(o?.status == 0, "\(w.arguments.joined(separator: " ")): \(o?.stderr ?? "")")
      if w.served { #expect(o?.stderr.contains("no host is running") == true) }
    }
    let missing = lost(writes, all)
    #expect(missing.isEmpty, "\(missing.count) acknowledged changes lost: \(missing.prefix(10))")
    print("StateTransactionTests files: \(tally(all)), \(missing.count) lost")
  }

  /// 200 writers through a running host: every change it acknowledged is on disk.
  @Test func twoHundredWritersThroughAHost() throws {
    let writes = try fixture(each: 10, overrides: 140)
    let host = try host()
    defer { host.stop() }
    let outcomes = Mutex<[Outcome?]>(Array(repeating: nil, count: writes.count))
    let running = Running()
    Self.pool(writes.count, width: Self.width) { i in
      let o = Self.write(writes[i].arguments, running: running)
      outcomes.withLock { $0[i] = o }
    }
    host.stop()
    let all = outcomes.withLock { $0 }
    for (w, o) in zip(writes, all) {
      guard let o else { continue }
      // Refused "busy" is not acknowledged (the command line says so); anything else fails.
      #expect(o.status == 0 || o.busy, "\(w.arguments.joined(separator: " ")): \(o.stderr)")
      if w.served && o.acknowledged { #expect(o.byHost, "\(o.stderr)") }
    }
    #expect(all.contains { $0?.acknowledged == true && $0?.byHost == true })
    let missing = lost(writes, all)
    #expect(missing.isEmpty, "\(missing.count) acknowledged changes lost: \(missing.prefix(10))")
    print("StateTransactionTests host: \(tally(all)), \(missing.count) lost")
  }

  /// 200 writers while a host starts and stops: on the files before, through the host while it
  /// runs, on the files again after; every acknowledged change is on disk.
  @Test func twoHundredWritersWhileAHostStartsAndStops() throws {
    let writes = try fixture(each: 10, overrides: 140)
    let outcomes = Mutex<[Outcome?]>(Array(repeating: nil, count: writes.count))
    let running = Running()
    // Phases: the host starts once 40 writes are done; writes from 100 on wait until it
    // answers; it stops once 20 were answered by it (or every write before 150 is done);
    // writes from 150 on wait until it was told to stop, and race its shutdown.
    let up = DispatchSemaphore(value: 0)
    let stopping = DispatchSemaphore(value: 0)
    let hostBox = Mutex<DevHost?>(nil)
    let failure = Mutex<String?>(nil)
    let coordinator = Thread { [self] in
      func count(_ p: (Int, Outcome?) -> Bool) -> Int {
        outcomes.withLock { $0.enumerated().filter { p($0.offset, $0.element) }.count }
      }
      while count({ $1 != nil }) < 40 { usleep(2_000) }
      do {
        let h = try host()
        hostBox.withLock { $0 = h }
      } catch {
        failure.withLock { $0 = "host did not start: \(error)" }
      }
      for _ in 0..<50 { up.signal() }
      while count({ $1?.byHost == true }) < 20 && count({ $0 < 150 && $1 != nil }) < 150 { usleep(2_000) }
      if let h = hostBox.withLock({ $0 }) { kill(h.process.processIdentifier, SIGTERM) }
      for _ in 0..<50 { stopping.signal() }
    }
    coordinator.start()
    Self.pool(writes.count, width: 16) { i in
      if i >= 150 {
        stopping.wait()
      } else if i >= 100 {
        up.wait()
      }
      let o = Self.write(writes[i].arguments, running: running)
      outcomes.withLock { $0[i] = o }
    }
    hostBox.withLock { $0 }?.stop()
    #expect(failure.withLock { $0 } == nil)
    let all = outcomes.withLock { $0 }
    #expect(all.contains { $0?.acknowledged == true && $0?.byHost == true }, "no write went through the host")
    #expect(
      all.contains { $0?.acknowledged == true && $0?.stderr.contains("no host is running") == true },
      "no write went to the files")
    let missing = lost(writes, all)
    #expect(missing.isEmpty, "\(missing.count) acknowledged changes lost: \(missing.prefix(10))")
    print("StateTransactionTests mixed: \(tally(all)), \(missing.count) lost")
  }

  /// A kill storm: 8 writers loop while the host is SIGKILLed at random moments (and
  /// restarted) and writers are SIGKILLed at random moments, at least 25 of each; afterwards
  /// every change whose command line exited 0 is on disk.
  @Test func killStormLosesNoAcknowledgedChange() throws {
    let writes = try fixture(each: 10, overrides: 3_000)
    let outcomes = Mutex<[Outcome?]>(Array(repeating: nil, count: writes.count))
    let running = Running()
    let stop = Atomic<Bool>(false)
    let answeredBy = Mutex<Set<String>>([])
    var host = try host()
    let finished = DispatchSemaphore(value: 0)
    let writersDone = Atomic<Bool>(false)
    Thread {
      Self.pool(writes.count, width: 8) { i in
        guard !stop.load(ordering: .relaxed) else { return }
        let o = Self.write(writes[i].arguments, running: running)
        outcomes.withLock { $0[i] = o }
        if o.acknowledged, let r = o.stderr.range(of: "(pid ") {
          let pid = o.stderr[r.upperBound...].prefix { $0.isNumber }
          answeredBy.withLock { _ = $0.insert(String(pid)) }
        }
      }
      writersDone.store(true, ordering: .relaxed)
      finished.signal()
    }.start()
    var (hostKills, writerKills) = (0, 0)
    // Ends when the writes run out too (they are sized not to), so it can never spin.
    while (hostKills < 25 || writerKills < 25) && !writersDone.load(ordering: .relaxed) {
      if writerKills < 25 && (hostKills >= 25 || Bool.random()) {
        usleep(UInt32.random(in: 0...40_000))
        if let pid = running.pids.withLock({ $0.randomElement() }), kill(pid, SIGKILL) == 0 {
          writerKills += 1
        }
        continue
      }
      let pid = host.process.processIdentifier
      if hostKills % 4 == 1 {
        // Every fourth host is killed only after it acknowledged a change, so the storm
        // certainly kills hosts that were answering, not only hosts still starting (a new
        // host takes a few seconds to answer while writers keep changing the files it judges).
        let end = Date().addingTimeInterval(60)
        while !answeredBy.withLock({ $0.contains(String(pid)) }) && Date() < end { usleep(5_000) }
      }
      usleep(UInt32.random(in: 0...150_000))
      kill(pid, SIGKILL)
      host.process.waitUntilExit()
      hostKills += 1
      host = try DevHost.launch(
        ["run", "--manifests", manifests, "--plugins", plugins, "--state", state, "--for", "600"])
    }
    stop.store(true, ordering: .relaxed)
    // Killed, not stopped: this host may be so new that a SIGTERM would find it between
    // ignoring the signal and listening for it (RunCommand's SignalWaiter), and be lost.
    kill(host.process.processIdentifier, SIGKILL)
    host.process.waitUntilExit()
    finished.wait()
    let all = outcomes.withLock { $0 }
    let missing = lost(writes, all)
    #expect(hostKills + writerKills >= 50)
    #expect(all.contains { $0?.acknowledged == true && $0?.byHost == true }, "no write went through a host")
    #expect(
      all.contains { $0?.acknowledged == true && $0?.stderr.contains("no host is running") == true },
      "no write went to the files")
    #expect(missing.isEmpty, "\(missing.count) acknowledged changes lost: \(missing.prefix(10))")
    print(
      "StateTransactionTests storm: \(hostKills) host and \(writerKills) writer SIGKILLs; \(tally(all)), \(missing.count) lost"
    )
  }
}
