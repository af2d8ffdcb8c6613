import CForsettiSys
import ForsettiCore
import ForsettiTestSupport
import Foundation
import Glibc
import Testing

@testable import ForsettiRuntime

/// The handover document an image of the host leaves the next (`upgrade`), and the preflight
/// that runs the next executable on it before anything is given up: a document is read back as
/// written, one of another format or shape is refused by name, descriptors not of the kind it
/// says are refused, and an executable that exits, hangs or says nothing is refused.
@Suite struct HandoverTests {
  static func sample(hold: Int32 = 10, lock: Int32 = 11, control: Int32? = 12) -> Handover {
    Handover(
      token: "t-1", fromVersion: "0.1.0", executable: "/usr/bin/forsetti-host",
      stateDirectory: "/var/lib/forsetti",
      holdFD: hold, lockFD: lock, controlFD: control, startedAt: 1_700_000_000, upgrades: 2)
  }

  @Test func theDocumentIsReadBackAsWritten() throws {
    for h in [Self.sample(), Self.sample(control: nil)] {
      let fd = try #require(try? h.memfd().get())
      defer { close(fd) }
      #expect(try Handover.read(fd: fd) == h)
      // Sealed: the preflight it is handed to cannot change what the new image reads.
      let x: [UInt8] = [0x20]
      #expect(x.withUnsafeBytes { pwrite(fd, $0.baseAddress, 1, 0) } == -1 && errno == EPERM)
      #expect(try Handover.read(fd: fd) == h)
    }
  }

  static func worker(_ id: String, first fd: Int32) -> WorkerHandover {
    WorkerHandover(
      moduleID: id, pid: 4242, socketFD: fd, ringFD: fd + 1, doorbellFD: fd + 2, outputFD: fd + 3,
      pendingOutput: [0x68, 0x69], recentLines: ["a line"],
      cgroup: [.init(version: "v2", directory: "/sys/fs/cgroup/x", controllers: ["memory", "pids"])],
      subscriptions: [.init(id: 513, type: "com.test.tick")], messageHandler: true, serving: 2,
      granted: ["storage"], loadedFrom: "/var/lib/forsetti/versions/x.so", loadedIsSwift: false,
      binaryPath: "/usr/lib/x.so", ui: .object(JSONObject([("moduleID", .string(id))])))
  }

  /// A document handing over running modules' workers is of format 2 and reads back whole; one
  /// naming a descriptor twice, or a module twice, is no host's.
  @Test func workersAndChannelsAreReadBackAsWritten() throws {
    var h = Self.sample()
    h.workers = [Self.worker("com.test.a", first: 20), Self.worker("com.test.b", first: 30)]
    h.channels = [ChannelHandover(consumer: "com.test.a", provider: "com.test.b", fd: 40)]
    h.overriddenModules = ["com.test.a": .off]
    h.overriddenProducts = ["com.acme.pro": .on]
    #expect(h.json.objectValue?["format"] == .number("2"))
    #expect(Self.sample().json.objectValue?["format"] == .number("2"))
    let fd = try #require(try? h.memfd().get())
    defer { close(fd) }
    #expect(try Handover.read(fd: fd) == h)
    var twice = h
    twice.channels[0].fd = 20
    #expect(throws: Handover.Refusal.malformed("a descriptor is named twice")) {
      try Handover.decode(Array(JSONWriter.string(twice.json).utf8))
    }
    twice = h
    twice.workers[1] = Self.worker("com.test.a", first: 30)
    #expect(throws: Handover.Refusal.malformed("a module's worker is named twice")) {
      try Handover.decode(Array(JSONWriter.string(twice.json).utf8))
    }
    var o = try #require(h.json.objectValue)
    var bad = o
    bad["overrides"] = .object(
      JSONObject([
        ("modules", .object(JSONObject([("com.test.a", .string("unset"))]))),
        ("products", .object(JSONObject([]))),
      ]))
    #expect(throws: Handover.Refusal.malformed("overrides.modules.com.test.a must be on or off")) {
      try Handover.decode(Array(JSONWriter.string(.object(bad)).utf8))
    }
    var w = try #require(h.workers[0].json.objectValue)
    w["messageHandler"] = .string("yes")
    o["workers"] = .array([.object(w)])
    #expect(throws: Handover.Refusal.malformed("a worker's messageHandler must be true or false")) {
      try Handover.decode(Array(JSONWriter.string(.object(o)).utf8))
    }
  }

  /// A document larger than a host reads is not written: the upgrade is refused, naming the
  /// module whose part is largest (its subscriptions and output are its own to choose); a
  /// module's long lines are cut before they are handed over.
  @Test func aDocumentTooLargeIsNotWrittenAndLongLinesAreCut() throws {
    var h = Self.sample()
    var big = Self.worker("com.test.big", first: 30)
    big.subscriptions = (1...400).map {
      .init(id: Int64($0 * 256), type: String(repeating: "\u{1}", count: 200))
    }
    h.workers = [Self.worker("com.test.small", first: 20), big]
    let size = JSONWriter.string(h.json).utf8.count
    guard case .failure(.tooLarge(let why)) = h.memfd(limit: size - 1) else {
      Issue.record("a document over the limit was written")
      return
    }
    #expect(why.contains("com.test.big's, 400 subscriptions"), "\(why)")
    // Positive control: at its size, it is written.
    let fd = try #require(try? h.memfd(limit: size).get())
    close(fd)
    #expect(WorkerHandover.cut(String(repeating: "é", count: 1000)).utf8.count == 512)
    #expect(WorkerHandover.cut("short") == "short")
  }

  @Test func anotherFormatOrShapeIsRefusedByName() throws {
    var o = try #require(Self.sample().json.objectValue)
    o["format"] = .number("3")
    #expect(throws: Handover.Refusal.format(3)) {
      try Handover.decode(Array(JSONWriter.string(.object(o)).utf8))
    }
    o["format"] = .number("1")
    o["lockFD"] = .string("11")
    #expect(throws: Handover.Refusal.malformed("lockFD must be an integer")) {
      try Handover.decode(Array(JSONWriter.string(.object(o)).utf8))
    }
    o["lockFD"] = .number("-1")
    #expect(throws: Handover.Refusal.malformed("lockFD is not a descriptor")) {
      try Handover.decode(Array(JSONWriter.string(.object(o)).utf8))
    }
    #expect(throws: Handover.Refusal.self) { try Handover.decode(Array("[1]".utf8)) }
    #expect(throws: Handover.Refusal.self) {
      try Handover.decode([UInt8](repeating: 0x20, count: (1 << 20) + 1))
    }
  }

  @Test func descriptorsMustBeWhatTheDocumentSays() throws {
    let dir = TemporaryDirectory("handover")
    let held = open(dir.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    let lock = open(dir.url("host.lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    let listening = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    let idle = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    defer { for fd in [held, lock, listening, idle] { close(fd) } }
    let address = UnixSocketAddress(path: dir.url("s.sock"))
    defer { address.close() }
    try #require(address.with { bind(listening, $0, $1) } == 0 && listen(listening, 4) == 0)

    // The positive control: each what it says.
    try Self.sample(hold: held, lock: lock, control: listening).checkDescriptors()
    #expect(throws: Handover.Refusal.descriptor(name: "state directory", fd: lock, "is of another kind")) {
      try Self.sample(hold: lock, lock: lock, control: listening).checkDescriptors()
    }
    #expect(throws: Handover.Refusal.descriptor(name: "host.lock", fd: held, "is of another kind")) {
      try Self.sample(hold: held, lock: held, control: listening).checkDescriptors()
    }
    #expect(throws: Handover.Refusal.descriptor(name: "control socket", fd: idle, "is not listening")) {
      try Self.sample(hold: held, lock: lock, control: idle).checkDescriptors()
    }
    #expect(throws: Handover.Refusal.descriptor(name: "host.lock", fd: 9999, "is not open")) {
      try Self.sample(hold: held, lock: 9999, control: listening).checkDescriptors()
    }
  }

  /// The descriptors must be the configured state directory's own: the directory at its path,
  /// its `host.lock` held by this process. A handover naming another directory, another file,
  /// or a lock another process holds is refused.
  @Test func descriptorsMustBeTheStateDirectorysOwn() throws {
    let dir = TemporaryDirectory("handover-own")
    let state = dir.url("state")
    let other = dir.url("other")
    for d in [state, other] {
      try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    }
    let held = open(state, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    let lock = open(state + "/host.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    let stranger = open(other + "/host.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    defer { for fd in [held, lock, stranger] { close(fd) } }
    try #require(flock(lock, LOCK_EX | LOCK_NB) == 0)

    // The positive control: the directory at the path, its lock, held here.
    try Self.sample(hold: held, lock: lock, control: nil).checkDescriptors(stateDirectory: state)
    #expect(
      throws: Handover.Refusal.descriptor(
        name: "state directory", fd: held, "is not the directory at \(other)")
    ) { try Self.sample(hold: held, lock: lock, control: nil).checkDescriptors(stateDirectory: other) }
    #expect(
      throws: Handover.Refusal.descriptor(
        name: "host.lock", fd: stranger, "is not the state directory's host.lock")
    ) { try Self.sample(hold: held, lock: stranger, control: nil).checkDescriptors(stateDirectory: state) }
    // The same file, opened again: its lock is the first open file's, not this one's.
    let again = open(state + "/host.lock", O_RDWR | O_CLOEXEC)
    defer { close(again) }
    #expect(throws: Handover.Refusal.descriptor(name: "host.lock", fd: again, "is locked by another process"))
    {
      try Self.sample(hold: held, lock: again, control: nil).checkDescriptors(stateDirectory: state)
    }
  }

  /// A script at `dir/name` with `body`, written through a descriptor closed on exec: one a
  /// process another test spawns meanwhile inherited would make running it "Text file busy".
  static func script(_ dir: TemporaryDirectory, _ name: String, _ body: String) throws -> String {
    let path = dir.url(name)
    let bytes = Array("#!/bin/sh\n\(body)\n".utf8)
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o755)
    try #require(fd >= 0)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    try #require(written == bytes.count)
    return path
  }

  @Test func thePreflightRefusesWhatCannotTakeTheHostOver() throws {
    let dir = TemporaryDirectory("preflight")
    let fd = try #require(try? Self.sample().memfd().get())
    defer { close(fd) }

    let exits = try Self.script(dir, "exits", "echo not a host >&2; exit 1")
    #expect(
      UpgradePreflight.run(exits, memfd: fd)
        == .failure(.exited(path: exits, status: 1, said: "not a host")))
    let hangs = try Self.script(dir, "hangs", "exec sleep 60")
    #expect(
      UpgradePreflight.run(hangs, memfd: fd, deadline: 0.5) == .failure(.timedOut(path: hangs, seconds: 0.5)))
    let mute = try Self.script(dir, "mute", "exit 0")
    #expect(UpgradePreflight.run(mute, memfd: fd) == .failure(.notReady(path: mute, said: "")))
    #expect(
      UpgradePreflight.run(dir.url("missing"), memfd: fd)
        == .failure(.spawn(path: dir.url("missing"), errno: ENOENT)))
    // It reads the document on descriptor 3, as the host's executable does.
    let reads = try Self.script(dir, "reads", "head -c 11 <&3 >/dev/null && echo ready 9.9.9")
    #expect(UpgradePreflight.run(reads, memfd: fd) == .success("9.9.9"))

    // The host's own executable reads it and says its version.
    #expect(UpgradePreflight.run(HostBinary.path, memfd: fd) == .success(ForsettiVersion.current.description))
    // And refuses a document it cannot read, saying why.
    var o = try #require(Self.sample().json.objectValue)
    o["format"] = .number("7")
    let bytes = Array(JSONWriter.string(.object(o)).utf8)
    let other = forsetti_memfd("other", UInt64(bytes.count))
    defer { close(other) }
    _ = bytes.withUnsafeBytes { pwrite(other, $0.baseAddress, $0.count, 0) }
    guard case .failure(.exited(_, 1, let said)) = UpgradePreflight.run(HostBinary.path, memfd: other) else {
      Issue.record("a document of format 7 was not refused")
      return
    }
    #expect(said.contains("format 7; this image reads formats 1 to 2"), "\(said)")
  }
}
