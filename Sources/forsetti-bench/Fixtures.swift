import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import ForsettiRuntime
import Foundation
import Glibc
import Synchronization

/// Generated C modules, built with cc into the benchmark's temporary directory.
enum Fixtures {
  struct Module {
    var id: String
    var entry: String
    var source: String
  }

  static func module(id: String, entry: String, start: String, prelude: String = "") -> Module {
    Module(
      id: id, entry: entry,
      source: """
        #include <forsetti.h>
        #include <stdio.h>
        #include <time.h>
        \(prelude)
        static forsetti_status s(void *self, const forsetti_host *host) { (void)self; \(start) }
        static void t(void *self) { (void)self; }
        static const forsetti_module_descriptor d = { sizeof d, "\(id)", "service", 1, 0, 0, NULL };
        static const forsetti_module m = { FORSETTI_ABI_VERSION, sizeof m, &d, NULL, s, t, NULL, NULL, NULL };
        const forsetti_module *\(entry)(uint32_t abi) { (void)abi; return &m; }
        """)
  }

  static func build(_ m: Module, to out: String, include: String) throws {
    let src = out + ".c"
    try m.source.write(toFile: src, atomically: true, encoding: .utf8)
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = ["cc", "-O2", "-shared", "-fPIC", "-I", include, "-o", out, src]
    try p.run()
    p.waitUntilExit()
  }

  /// `capabilities` and `extra` (members appended to the manifest) as a test fixture's.
  static func install(
    _ m: Module, in dir: String, include: String, capabilities: [String] = [], extra: String = ""
  ) throws {
    try build(m, to: dir + "/plugins/\(m.entry).so", include: include)
    let caps = capabilities.map { "\"\($0)\"" }.joined(separator: ",")
    let manifest = """
      {"schemaVersion":"1.0","moduleID":"\(m.id)","displayName":"bench","moduleVersion":{"major":1,"minor":0,"patch":0},
       "moduleType":"service","supportedPlatforms":["linux"],"minForsettiVersion":{"major":0,"minor":1,"patch":0},
       "capabilitiesRequested":[\(caps)],"entryPoint":"\(m.entry)"\(extra)}
      """
    try manifest.write(toFile: dir + "/manifests/\(m.entry).json", atomically: true, encoding: .utf8)
  }

  /// The gate stack's verdict on everything in `dir`.
  static func judge(_ dir: String) throws -> ([ModuleJudgement], BinaryIndex) {
    let report = try ManifestDiscovery.discover(from: DirectoryManifestSource(root: dir + "/manifests"))
    let ctx = GateContext(approvals: .init(approveAll: true), providers: .init(discovered: report.manifests))
    let index = BinaryIndex.build(directories: [dir + "/plugins"])
    return (
      GateStack.judge(report, context: ctx, inspect: index.inspectionStep(for:), laterSteps: nil), index
    )
  }

  /// Discovers, gates and starts everything in `dir`.
  static func start(_ dir: String, log: any LogSink, mode: ExecutionMode, versionCopies: Bool = false) throws
    -> ModuleManager
  {
    let (judgements, index) = try judge(dir)
    let m = ModuleManager(environment: HostEnvironment(stateDirectory: dir + "/state", log: log), mode: mode)
    m.versionCopies = versionCopies
    m.activate(judgements, index: index)
    return m
  }

  static func rssKiB(_ pid: Int32) -> Double {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
      let line = s.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return .nan }
    return Double(line.split(separator: " ").dropFirst().first ?? "") ?? .nan
  }

}

/// A round trip over the worker's own mechanism, the shared-memory call ring, to an echo.
enum EchoChild {
  /// The same round trip over the worker's own mechanism, the shared-memory call ring.
  static func ringRoundTrips(rounds: Int, ops: Int) -> [Double] {
    guard let ring = BenchmarkProbes.Ring() else { return [] }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_adddup2(&actions, ring.fd, 4)
    let exe =
      (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
      ?? CommandLine.arguments[0]
    var argv: [UnsafeMutablePointer<CChar>?] = [strdup(exe), strdup("--echo-ring"), nil]
    var pid: pid_t = 0
    posix_spawn(&pid, exe, &actions, nil, &argv, environ)
    close(ring.fd)
    let frame = Wire.encode(WireFrame(.publish, id: 1, [.string("bench.nobody"), .bytes([])]))
    let reply = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 8)
    defer { reply.deallocate() }
    let result = Clock.rounds(rounds, ops: ops) { n in
      for _ in 0..<n { _ = frame.withUnsafeBytes { ring.call($0, response: reply) } }
    }
    ring.close()
    var st: Int32 = 0
    waitpid(pid, &st, 0)
    return result
  }

}

enum Report {
  static func print(_ rows: [(figure: Sample, baseline: Sample?, note: String)], json: Bool) {
    if json {
      var out = "{\"machine\":\"\(machine())\",\"results\":["
      out += rows.map { r in
        // A side that did not run has no median: null, since JSON has no NaN.
        func n(_ v: Double) -> String { v.isFinite ? "\(v)" : "null" }
        var s =
          "{\"name\":\"\(r.figure.name)\",\"median\":\(n(r.figure.median)),\"min\":\(n(r.figure.min)),\"max\":\(n(r.figure.max))"
        if let b = r.baseline {
          s +=
            ",\"baseline\":{\"name\":\"\(b.name)\",\"median\":\(n(b.median)),\"min\":\(n(b.min)),\"max\":\(n(b.max))},\"ratio\":\(n(r.figure.median / b.median))"
        }
        // The note carries a target's verdict (the neighbours section's "met" or "missed").
        s += ",\"note\":\"\(r.note.replacingOccurrences(of: "\"", with: "\\\""))\""
        return s + "}"
      }.joined(separator: ",")
      Swift.print(out + "]}")
      return
    }
    Swift.print("machine: \(machine())")
    for r in rows {
      let isBytes = r.figure.name.contains("bytes")
      let isCount = r.figure.name.contains("(count)")
      func fmt(_ v: Double) -> String {
        isCount ? String(format: "%.0f", v) : isBytes ? String(format: "%.1f MiB", v / 1_048_576) : human(v)
      }
      var line = "\(r.figure.name): \(fmt(r.figure.median)) (\(fmt(r.figure.min))–\(fmt(r.figure.max)))"
      if let b = r.baseline {
        line +=
          "\n    vs \(b.name): \(fmt(b.median)) (\(fmt(b.min))–\(fmt(b.max)))  ratio \(ratio(r.figure.median / b.median))"
      }
      Swift.print(line + "\n    \(r.note)")
    }
  }

  /// Two decimals, or two significant digits for ratios below 0.1 (0.0024×, not 0.00×).
  static func ratio(_ r: Double) -> String {
    r >= 0.1 || r == 0 || !r.isFinite ? String(format: "%.2f×", r) : String(format: "%.2g×", r)
  }

  static func machine() -> String {
    var u = utsname()
    uname(&u)
    let release = withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    return "\(ProcessInfo.processInfo.activeProcessorCount) CPUs, Linux \(release)"
  }
}

/// Watcher event times, handed from the watcher thread to the benchmark loop.
final class EventTimes: Sendable {
  private let times = Mutex<[ContinuousClock.Instant]>([])
  private let ready = DispatchSemaphore(value: 0)

  func post(_ t: ContinuousClock.Instant) {
    times.withLock { $0.append(t) }
    ready.signal()
  }

  /// The first event since the last call (later ones of the same burst are dropped).
  func next() -> ContinuousClock.Instant? {
    guard ready.wait(timeout: .now() + 5) == .success else { return nil }
    return times.withLock { t in
      defer { t.removeAll() }
      while ready.wait(timeout: .now()) == .success {}
      return t.first
    }
  }
}
