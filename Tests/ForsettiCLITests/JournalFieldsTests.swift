import ForsettiHost
import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Testing

/// The journal's structured entries (issue 31): the real built host, its standard error the
/// journal stream ($JOURNAL_STREAM), in a mount namespace of its own where
/// /run/systemd/journal/socket is a datagram socket this test owns; the entries read back in
/// journald's native protocol.
@Suite(.onTestThreads) struct JournalFieldsTests {
  static let moduleID = "com.test.journaled"
  static let blockedID = "com.test.blocked"

  /// A module that logs a plain line and a line trying to forge fields, and one that never starts.
  static func install(_ h: HostileHost) throws {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: "journaled_entry")
    f.start = """
      fixture_log("hello journal");
      fixture_log("forged\\nFORSETTI_MODULE=com.evil\\nPRIORITY=0\\nMESSAGE=forged");
      return FORSETTI_OK;
      """
    try h.install(f)
    var blocked = ModuleFixture(moduleID: blockedID, entryPoint: "blocked_entry")
    blocked.entryBody = "return NULL;"
    try h.install(blocked)
  }

  @Test func entriesCarryModuleReasonAndPriorityFields() throws {
    try #require(geteuid() == 0, "a private mount namespace needs root")
    let h = HostileHost(.current)
    try Self.install(h)
    let journal = try JournalSocket(in: h.dir)
    let run = try Self.run(h, journal: journal.directory, journalStream: true)
    // 1: a module is blocked (the one that never loads), as ExitCode.blocked says.
    #expect(run.status == 1, "\(run.stderr.suffix(2000))")
    let entries = try journal.drain()

    let mine = entries.filter { $0["FORSETTI_MODULE"] == [Self.moduleID] }
    let hello = mine.first { $0["MESSAGE"]?.first?.contains("hello journal") == true }
    #expect(hello?["PRIORITY"] == ["6"], "\(entries)")
    #expect(hello?["FORSETTI_ORIGIN"] == ["module"])
    #expect(hello?["SYSLOG_IDENTIFIER"] == ["forsetti-host"])
    #expect(hello?["MESSAGE"] == ["[module=\(Self.moduleID)] hello journal"])

    // Issue 40: the host's `started X` line carried no FORSETTI_MODULE, so `journalctl
    // FORSETTI_MODULE=X` could not tell X's story. It does now; its text is unchanged.
    let started = mine.first { $0["MESSAGE"]?.first?.hasPrefix("[host] started \(Self.moduleID)") == true }
    #expect(started?["FORSETTI_ORIGIN"] == ["host"], "\(entries)")
    #expect(started?["CODE_FILE"]?.first?.isEmpty == false, "\(entries)")

    // The forging line is one entry of the module's, its text a value only.
    let forged = mine.first { $0["MESSAGE"]?.first?.contains("forged") == true }
    #expect(forged != nil, "\(entries)")
    #expect(forged?["PRIORITY"] == ["6"])
    #expect(forged?["FORSETTI_MODULE"] == [Self.moduleID])
    #expect(forged?["MESSAGE"]?.count == 1)
    #expect(!entries.contains { $0["FORSETTI_MODULE"]?.contains("com.evil") == true })
    #expect(!entries.contains { $0["PRIORITY"]?.contains("0") == true })

    // The host's line about the module that never started names its reason code.
    let blocked = entries.first { $0["FORSETTI_MODULE"] == [Self.blockedID] && $0["FORSETTI_REASON"] != nil }
    let reason = try #require(blocked?["FORSETTI_REASON"]?.first, "\(entries)")
    #expect(ReasonCode(rawValue: reason) != nil, "\(reason)")
    #expect(blocked?["FORSETTI_ORIGIN"] == ["host"])
    #expect(blocked?["PRIORITY"] == ["3"])
    #expect(blocked?["MESSAGE"]?.first?.contains(reason) == true)
    // A host line names the host's log call: a file of this repository whose line there logs.
    let file = try #require(blocked?["CODE_FILE"]?.first, "\(entries)")
    let line = try #require(blocked?["CODE_LINE"]?.first.flatMap { Int($0) }, "\(entries)")
    #expect(blocked?["CODE_FUNC"]?.first?.isEmpty == false, "\(entries)")
    // #fileID is TARGET/FILE.swift: the file is somewhere under Sources/TARGET.
    let parts = file.split(separator: "/").map(String.init)
    try #require(parts.count == 2 && parts[1].hasSuffix(".swift"), "\(file)")
    let target = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent().appendingPathComponent("Sources").appendingPathComponent(parts[0])
    let found = (FileManager.default.enumerator(atPath: target.path)?.allObjects as? [String] ?? [])
      .filter { ($0 as NSString).lastPathComponent == parts[1] }
    try #require(found.count == 1, "\(file): \(found)")
    let source = target.appendingPathComponent(found[0])
    let lines = try String(contentsOf: source, encoding: .utf8).components(separatedBy: "\n")
    #expect(line >= 1 && line <= lines.count && lines[line - 1].contains("hostLog("), "\(file):\(line)")
    // A module's text has no place the host knows.
    #expect(hello?["CODE_FILE"] == nil && forged?["CODE_LINE"] == nil, "\(entries)")

    // Every entry went through the journal: none of them is also a plain line.
    #expect(!run.stdout.contains("hello journal"), "\(run.stdout)")
  }

  @Test func withoutTheJournalStreamNothingReachesTheSocket() throws {
    try #require(geteuid() == 0, "a private mount namespace needs root")
    let h = HostileHost(.current)
    try Self.install(h)
    let journal = try JournalSocket(in: h.dir)
    let run = try Self.run(h, journal: journal.directory, journalStream: false)
    // 1: a module is blocked (the one that never loads), as ExitCode.blocked says.
    #expect(run.status == 1, "\(run.stderr.suffix(2000))")
    #expect(try journal.drain().isEmpty)
    #expect(run.stdout.contains("info    [module=\(Self.moduleID)] hello journal"), "\(run.stdout)")
    // Positive control: the socket is reachable from the host's namespace, the run above just
    // never wrote to it.
    let probe = try ProcessRunner.run(
      "/usr/bin/unshare",
      Self.namespaced(journal.directory) + ["/bin/sh", "-c", "test -S /run/systemd/journal/socket"])
    #expect(probe.status == 0, "\(probe.stderr)")
  }

  @Test func aJournalWithoutItsSocketGetsPlainLines() throws {
    try #require(geteuid() == 0, "a private mount namespace needs root")
    let h = HostileHost(.current)
    try Self.install(h)
    let empty = h.dir.url("no-journal")
    try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
    let run = try Self.run(h, journal: empty, journalStream: true)
    #expect(run.status == 1, "\(run.stderr.suffix(2000))")
    #expect(run.stdout.contains("info    [module=\(Self.moduleID)] hello journal"), "\(run.stdout)")
    // Standard error is the journal stream: its plain lines carry the priority prefix.
    #expect(run.stderr.contains("<3>[module=\(Self.blockedID)]"), "\(run.stderr)")
  }

  @Test func aRefusingJournalGetsPlainLinesAndOneNotice() throws {
    try #require(geteuid() == 0, "a private mount namespace needs root")
    let h = HostileHost(.current)
    try Self.install(h)
    // The socket's file stays when its reader is gone: every send is refused (ECONNREFUSED).
    let journal = try JournalSocket(in: h.dir)
    journal.stopReading()
    let directory = journal.directory
    let run = try Self.run(h, journal: directory, journalStream: true)
    #expect(run.status == 1, "\(run.stderr.suffix(2000))")
    #expect(run.stdout.contains("info    [module=\(Self.moduleID)] hello journal"), "\(run.stdout)")
    #expect(run.stderr.components(separatedBy: "the journal refused a record").count == 2, "\(run.stderr)")
    #expect(run.stderr.contains("<3>[module=\(Self.blockedID)]"), "\(run.stderr)")
  }

  @Test func moduleMetadataNeverTakesATrustedName() {
    let record = LogRecord(
      level: .info, moduleID: Self.moduleID, message: "m",
      metadata: [
        "module": "com.evil", "MODULE": "com.evil", "priority": "0", "_PID": "1", "origin": "host",
        "x y-z": "v", String(repeating: "k", count: 80): "long",
      ])
    let fields = JournalLogSink.fields(of: record)
    let names = fields.map(\.name)
    #expect(names.filter { $0 == "FORSETTI_MODULE" }.count == 1)
    #expect(fields.first { $0.name == "FORSETTI_MODULE" }?.value == Array(Self.moduleID.utf8))
    #expect(names.filter { $0 == "PRIORITY" }.count == 1)
    #expect(names.filter { $0 == "FORSETTI_ORIGIN" }.count == 1)
    #expect(names.contains("FORSETTI_META_MODULE"))
    #expect(names.contains("FORSETTI_META__PID"))
    #expect(names.contains("FORSETTI_META_X_Y_Z"))
    #expect(names.allSatisfy { JournalLogSink.isValidFieldName($0) }, "\(names)")
    // The host's own metadata keeps its plain names, but not a reserved one.
    #expect(JournalLogSink.fieldName("capability", origin: .host) == "FORSETTI_CAPABILITY")
    #expect(JournalLogSink.fieldName("module", origin: .host) == "FORSETTI_META_MODULE")
    #expect(!JournalLogSink.isValidFieldName("_PID"))
    #expect(!JournalLogSink.isValidFieldName("1A"))
  }

  /// unshare's arguments for a private mount namespace with `journal`'s directory at
  /// /run/systemd/journal, ending in `--` before the command.
  static func namespaced(_ directory: String) -> [String] {
    [
      "--mount", "--", "/bin/sh", "-c",
      #"set -e; mount --make-rprivate /; mkdir -p /run/systemd/journal; mount --bind "$0" /run/systemd/journal; exec "$@""#,
      directory,
    ]
  }

  /// The host's run, `--for 2`, in the namespace; with `journalStream`, $JOURNAL_STREAM names its
  /// standard error (as systemd sets it: device:inode), else it is unset.
  static func run(_ h: HostileHost, journal directory: String, journalStream: Bool) throws -> ProcessResult {
    let set =
      journalStream
      ? #"JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2); export JOURNAL_STREAM; "#
      : "unset JOURNAL_STREAM; "
    try FileManager.default.createDirectory(atPath: h.dir.url("state"), withIntermediateDirectories: true)
    return try ProcessRunner.run(
      "/usr/bin/unshare",
      namespaced(directory) + [
        "/bin/sh", "-c", set + #"exec "$@""#, "sh", HostBinary.path, "run", "--manifests",
        h.dir.url("manifests"),
        "--plugins", h.dir.url("plugins"), "--state", h.dir.url("state"), "--approve-all", "--for", "2",
      ])
  }
}

/// A datagram socket standing in for journald's /run/systemd/journal/socket.
final class JournalSocket {
  let directory: String
  private var fd: Int32

  init(in dir: TemporaryDirectory) throws {
    directory = dir.url("journal")
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw JournalSocketError.socket(errno) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let path = Array((directory + "/socket").utf8)
    guard path.count < MemoryLayout.size(ofValue: address.sun_path) else {
      throw JournalSocketError.pathTooLong
    }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    guard bound == 0 else { throw JournalSocketError.bind(errno) }
    var size: Int32 = 8 << 20
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
  }

  /// Stops reading: the socket's file stays, and every send to it is refused (ECONNREFUSED).
  func stopReading() {
    if fd >= 0 { close(fd) }
    fd = -1
  }

  deinit { stopReading() }

  /// Every entry queued so far, each field's values by name (a field may repeat).
  func drain() throws -> [[String: [String]]] {
    var entries: [[String: [String]]] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    while true {
      let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
      if n < 0 {
        if errno == EAGAIN { return entries }
        throw JournalSocketError.recv(errno)
      }
      // An empty datagram is a large entry passed as a memfd: these entries are kept small.
      guard n > 0 else { throw JournalSocketError.memfdEntry }
      entries.append(try Self.parse(buffer[..<n]))
    }
  }

  /// journald's native protocol: `NAME=value\n`, or `NAME\n`, a little-endian 64-bit length,
  /// the value's bytes and `\n`.
  static func parse(_ bytes: ArraySlice<UInt8>) throws -> [String: [String]] {
    var fields: [String: [String]] = [:]
    var i = bytes.startIndex
    while i < bytes.endIndex {
      guard let newline = bytes[i...].firstIndex(of: 10) else { throw JournalSocketError.malformed }
      let line = bytes[i..<newline]
      if let equals = line.firstIndex(of: UInt8(ascii: "=")) {
        fields[String(decoding: line[..<equals], as: UTF8.self), default: []].append(
          String(decoding: line[(equals + 1)...], as: UTF8.self))
        i = newline + 1
        continue
      }
      let start = newline + 1
      guard bytes.endIndex - start >= 8 else { throw JournalSocketError.malformed }
      var length: UInt64 = 0
      for k in 0..<8 { length |= UInt64(bytes[start + k]) << (8 * UInt64(k)) }
      let valueStart = start + 8
      guard length < UInt64(bytes.endIndex - valueStart) else { throw JournalSocketError.malformed }
      let valueEnd = valueStart + Int(length)
      guard bytes[valueEnd] == 10 else { throw JournalSocketError.malformed }
      fields[String(decoding: line, as: UTF8.self), default: []].append(
        String(decoding: bytes[valueStart..<valueEnd], as: UTF8.self))
      i = valueEnd + 1
    }
    return fields
  }
}

/// What went wrong standing in for the journal.
enum JournalSocketError: Error {
  case socket(Int32)
  case bind(Int32)
  case recv(Int32)
  case pathTooLong
  case memfdEntry
  case malformed
}
