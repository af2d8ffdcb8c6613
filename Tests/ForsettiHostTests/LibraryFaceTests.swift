import ForsettiTestSupport
import Foundation
import Testing

/// What `import ForsettiHost` shows an application: the facade and the value types its members
/// name, never the runtime's machinery. A probe is type-checked as code outside this package
/// would be (the build's modules, no `-package-name` of ours): it must not see `ModuleManager`,
/// `LiveHost`, `WorkerLoop` or `ControlServer`, through `ForsettiHost` or by importing
/// `ForsettiRuntime` itself.
@Suite(.onTestThreads) struct LibraryFaceTests {
  let dir = TemporaryDirectory("library-face")

  /// The build directory the tests run from (`.build/debug`), where `Modules/` holds the
  /// compiled interfaces an outside package would import.
  static var buildDirectory: String { (HostBinary.path as NSString).deletingLastPathComponent }

  /// The package's name as SwiftPM gave it to the compiler (`-package-name`, in the build's
  /// description): its identity, the root directory's name, made an identifier (`ci-a` is
  /// `ci_a`).
  static var packageName: String {
    let description = (buildDirectory as NSString).deletingLastPathComponent + "/debug.yaml"
    if let text = try? String(contentsOfFile: description, encoding: .utf8),
      let flag = text.range(of: "\"-package-name\",\""),
      let end = text[flag.upperBound...].firstIndex(of: "\"")
    {
      return String(text[flag.upperBound..<end])
    }
    return String(
      (HostBinary.packageRoot as NSString).lastPathComponent.lowercased().map {
        $0.isLetter || $0.isNumber ? $0 : "_"
      })
  }

  /// Flags that let `swiftc` import the package's modules: the Swift interfaces, and the C
  /// targets' module maps and headers they depend on.
  static func importFlags() throws -> [String] {
    var flags = ["-I", buildDirectory + "/Modules"]
    let sources = HostBinary.packageRoot + "/Sources"
    for name in try FileManager.default.contentsOfDirectory(atPath: sources).sorted()
    where name.hasPrefix("C") {
      let map = sources + "/" + name + "/module.modulemap"
      let generated = buildDirectory + "/" + name + ".build/module.modulemap"
      let include = sources + "/" + name + "/include"
      for file in [map, generated] where FileManager.default.fileExists(atPath: file) {
        flags += ["-Xcc", "-fmodule-map-file=" + file]
      }
      if FileManager.default.fileExists(atPath: include) { flags += ["-Xcc", "-I" + include] }
    }
    return flags
  }

  /// Type-checks `source` as a file of another package (or of this one, with `insidePackage`).
  func typecheck(_ source: String, insidePackage: Bool = false) throws -> ProcessResult {
    let file = dir.url("probe-\(UUID().uuidString).swift")
    try source.write(toFile: file, atomically: true, encoding: .utf8)
    var arguments = ["swiftc", "-typecheck"] + (try Self.importFlags())
    if insidePackage { arguments += ["-package-name", Self.packageName] }
    return try ProcessRunner.run("/usr/bin/env", arguments + [file])
  }

  static let machinery = ["ModuleManager", "LiveHost", "WorkerLoop", "ControlServer"]

  /// Uses each of the machinery's types by name.
  static func probe(importing modules: [String]) -> String {
    modules.map { "import \($0)\n" }.joined()
      + machinery.enumerated().map { "let probe\($0.offset): Any.Type = \($0.element).self\n" }.joined()
  }

  @Test func anApplicationSeesTheFacadeAndItsValueTypes() throws {
    // The control: what docs/embedding.md's program uses type-checks, so a failure below is
    // the machinery hidden, not a probe that cannot compile at all.
    let r = try typecheck(
      """
      import ForsettiHost
      var c = ForsettiHost.Configuration(manifestsDirectory: "m", pluginDirectories: ["p"], stateDirectory: "s")
      c.isolation?.limits.memoryBytes = 64 << 20
      c.development = DevelopmentSettings(grace: 2, debounce: 0.1)
      let records: [ModuleRecord] = []
      let changes: [HostChange] = []
      let reports: [ReloadReport] = []
      let sink: any LogSink = MemoryLogSink()
      print(c.applicationID, records.count, changes.count, reports.count, sink)
      """)
    #expect(r.status == 0, "\(r.stderr)")
  }

  @Test func anApplicationCannotNameTheRuntimesMachinery() throws {
    for modules in [["ForsettiHost"], ["ForsettiHost", "ForsettiRuntime"]] {
      let r = try typecheck(Self.probe(importing: modules))
      #expect(r.status != 0, "import \(modules): the machinery is visible")
      for name in Self.machinery {
        #expect(
          r.stderr.contains("cannot find '\(name)' in scope"),
          "import \(modules): \(name) not refused:\n\(r.stderr)")
      }
    }
    // Inside the package the same probe compiles: the names are there, kept from others only.
    let inside = try typecheck(
      Self.probe(importing: ["ForsettiHost", "ForsettiRuntime"]), insidePackage: true)
    #expect(inside.status == 0, "\(inside.stderr)")
  }
}
