import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// A `.so` whose `.dynsym` header claims entries of 2^63 bytes (it used to trap the host at
/// inspection), beside a healthy module: every verb reports the bad file and serves the other.
@Suite(.onTestThreads, .serialized) struct MalformedBinaryTests {
  let dir = TemporaryDirectory("malformed")

  static var healthy: ModuleFixture {
    var f = ModuleFixture(moduleID: "com.test.healthy", entryPoint: "healthy_entry")
    f.start = "fixture_log(\"healthy started\"); return FORSETTI_OK;"
    return f
  }

  static var broken: ModuleFixture { ModuleFixture(moduleID: "com.test.broken", entryPoint: "broken_entry") }

  /// Builds the broken module to `relative` with its `.dynsym` entry size set to 2^63.
  @discardableResult
  func buildMalformed(as relative: String) throws -> String {
    let path = try Self.broken.build(in: dir, as: relative)
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    func read(_ at: Int, _ width: Int) -> Int {
      (0..<width).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) }
    }
    let (table, count) = (read(0x28, 8), read(0x3C, 2))
    // Elf64_Shdr: sh_type at 4, sh_entsize at 0x38; SHT_DYNSYM is 11.
    let dynsym = try #require((0..<count).map { table + 64 * $0 }.first { read($0 + 4, 4) == 11 })
    for i in 0..<8 { bytes[dynsym + 0x38 + i] = i == 7 ? 0x80 : 0 }
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
  }

  var common: [String] {
    ["--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", dir.url("state")]
  }

  @Test func inspectReportsTheFileAndExitsOne() throws {
    let bad = try buildMalformed(as: "plugins/broken.so")
    let text = try HostBinary.run(["inspect", bad])
    // 1 is the verb's own "not loadable" answer; a trap would end it by a signal instead.
    #expect(text.status == 1, "\(text.stdout)\(text.stderr)")
    #expect(text.stdout.contains("\(bad): malformed ELF: .dynsym"), "\(text.stdout)")
    #expect(text.stdout.contains("9223372036854775808"), "\(text.stdout)")
    let json = try HostBinary.run(["inspect", bad, "--json"])
    #expect(json.status == 1)
    let o = try #require(try JSONParser.parse(json.stdout).objectValue)
    #expect(o["valid"] == .bool(false))
    #expect(o["error"]?.stringValue?.contains(".dynsym") == true)
  }

  @Test func checkJudgesTheHealthyModuleAndNamesTheBadFile() throws {
    try Self.healthy.install(in: dir, name: "healthy")
    try buildMalformed(as: "plugins/broken.so")
    // No manifest names the bad file: the healthy module passes all the same.
    let alone = try HostBinary.run(["check"] + common + ["--approve-all"])
    #expect(alone.status == 0, "\(alone.stdout)\(alone.stderr)")
    // …and the bad file is still named, though no manifest asks for it.
    #expect(alone.stdout.contains("not inspectable: "), "\(alone.stdout)")
    #expect(alone.stdout.contains("broken.so: malformed ELF: .dynsym"), "\(alone.stdout)")
    // A manifest naming its entry point is blocked, and the reason names the file.
    try dir.write("manifests/broken.json", Self.broken.manifest())
    let r = try HostBinary.run(["check"] + common + ["--approve-all", "--json"])
    #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
    let modules = try #require(try JSONParser.parse(r.stdout).objectValue?["modules"]?.arrayValue)
      .compactMap(\.objectValue)
    let byID = Dictionary(
      uniqueKeysWithValues: modules.compactMap { m in m["moduleID"]?.stringValue.map { ($0, m) } })
    #expect(byID["com.test.healthy"]?["verdict"]?.stringValue == "pass", "\(r.stdout)")
    let broken = try #require(byID["com.test.broken"])
    #expect(broken["reason"]?.stringValue == "invalidBinary")
    #expect(r.stdout.contains("broken.so: malformed ELF: .dynsym"), "\(r.stdout)")
    let failures = try JSONParser.parse(r.stdout).objectValue?["binaryFailures"]?.arrayValue ?? []
    #expect(failures.count == 1, "\(r.stdout)")
  }

  @Test func runStartsTheHealthyModule() throws {
    try Self.healthy.install(in: dir, name: "healthy")
    try buildMalformed(as: "plugins/broken.so")
    try dir.write("manifests/broken.json", Self.broken.manifest())
    let r = try HostBinary.run(["run"] + common + ["--approve-all", "--for", "2"])
    // 1: one module was blocked; the host itself ran its course.
    #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
    #expect(r.stdout.contains("[module=com.test.healthy] healthy started"), "\(r.stdout)")
    #expect(r.stdout.contains("invalidBinary"), "\(r.stdout)")
  }

  @Test func aRunningDevSurvivesTheFileDroppedIntoItsPlugins() throws {
    try Self.healthy.install(in: dir, name: "healthy")
    let host = try DevHost(common + ["--approve-all", "--debounce", "50", "--grace", "0.3"])
    defer { host.stop() }
    #expect(host.await("for changes") != nil, "\(host.lines)")
    #expect(host.await("healthy started") != nil, "\(host.lines)")

    // Dropped in as a build tool's last step does: built aside, renamed into place.
    let staged = try buildMalformed(as: "staging/broken.so")
    #expect(rename(staged, dir.url("plugins/broken.so")) == 0)
    // No sleep for the watcher: it reads changes in order, so the reload below, of a file
    // renamed after this one, is proof the host had already taken the dropped file in (alone or
    // in the same batch), whatever the machine's load.

    // The healthy module is still served: a rebuild of it is reloaded as before.
    var next = Self.healthy
    next.start = "fixture_log(\"healthy rebuilt\"); return FORSETTI_OK;"
    let mark = host.lines.count
    let tmp = try next.build(in: dir, as: "staging/healthy.so")
    #expect(rename(tmp, dir.url("plugins/healthy.so")) == 0)
    #expect(host.await("reload com.test.healthy", from: mark) != nil, "\(host.lines)")
    #expect(host.await("healthy rebuilt", from: mark) != nil, "\(host.lines)")
    #expect(host.process.isRunning)
  }
}
