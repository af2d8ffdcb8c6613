import ForsettiTestSupport
import Foundation
import Testing

// The layering of the package, enforced: `Package.swift`'s dependencies and every `import` of
// every target's Swift sources are checked against one table, `Layering.forsetti`. The table of
// docs/architecture.md is held equal to it by ArchitectureDocTests. Upstream Forsetti keeps its
// layers the same way (Tests/ForsettiArchitectureTests/ArchitectureEnforcementTests.swift).

// MARK: - The layering, stated once

/// What one target may depend on and import.
struct LayerRule: Sendable, Hashable {
  /// Targets of this package it may list in `dependencies:` (and so import).
  var mayDependOn: Set<String>
  /// Whether its sources may import Foundation or any of its parts.
  var foundation: Bool
  /// Why the rule is what it is; failure messages quote it.
  var why: String
}

/// Which targets a row of the layering covers.
enum LayerSubject: Sendable, Hashable, CustomStringConvertible {
  case target(String)
  /// Every target declared with a `path:` under `Plugins/`: the example modules.
  case examples
  /// Every `.testTarget`.
  case tests

  /// How the row is named in docs/architecture.md.
  var description: String {
    switch self {
    case .target(let name): "`\(name)`"
    case .examples: "examples (`Plugins/*`)"
    case .tests: "tests (`.testTarget`)"
    }
  }
}

/// One row of the layering.
struct LayerRow: Sendable, Hashable {
  var subject: LayerSubject
  var rule: LayerRule
}

/// The allowed dependencies and imports of every target, bottom up: a row names only targets
/// of rows above it, so every dependency points down.
struct Layering: Sendable {
  var rows: [LayerRow]
  /// The Swift runtime's own modules and the C library: importable by every target (none of
  /// them brings Foundation in).
  var platformModules: Set<String>
  /// Foundation and its parts: importable only where a rule says `foundation`.
  var foundationModules: Set<String>
  /// Importable only by test code (test targets and `testSupport`).
  var testFrameworks: Set<String>
  /// The fixtures target every test target may use; it must use nothing of the product.
  var testSupport: String

  /// The rule for `target`: its own row, else the row of its kind (tests, examples).
  func rule(for target: PackageTarget) -> LayerRule? {
    if let row = rows.first(where: { $0.subject == .target(target.name) }) { return row.rule }
    if target.kind == .testTarget { return rows.first { $0.subject == .tests }?.rule }
    if target.path?.hasPrefix("Plugins/") == true { return rows.first { $0.subject == .examples }?.rule }
    return nil
  }

  /// Whether `target` is test code (which may import test frameworks and the fixtures).
  func isTestCode(_ target: PackageTarget) -> Bool {
    target.kind == .testTarget || target.name == testSupport
  }

  /// Rows that name a target no earlier row covers (an upward or unknown dependency in the
  /// table itself), or cover a subject twice.
  func problems() -> [String] {
    var seen = Set<String>()
    var subjects = Set<LayerSubject>()
    var out: [String] = []
    for row in rows {
      if !subjects.insert(row.subject).inserted { out.append("\(row.subject) has two rows") }
      for dep in row.rule.mayDependOn.sorted() where !seen.contains(dep) {
        out.append("\(row.subject) may depend on \(dep), which has no row above it")
      }
      if case .target(let name) = row.subject { seen.insert(name) }
    }
    return out
  }

  /// The layering of this package.
  static let forsetti = Layering(
    rows: [
      .init(
        subject: .target("CForsetti"),
        rule: .init(
          mayDependOn: [], foundation: false,
          why: "the module ABI (forsetti.h): the only thing modules compile against")),
      .init(
        subject: .target("CForsettiSys"),
        rule: .init(
          mayDependOn: [], foundation: false,
          why: "system calls glibc does not wrap, and the call ring's atomics")),
      .init(subject: .target("CLibElf"), rule: .init(mayDependOn: [], foundation: false, why: "libelf")),
      .init(subject: .target("CFFI"), rule: .init(mayDependOn: [], foundation: false, why: "libffi")),
      .init(subject: .target("CSeccomp"), rule: .init(mayDependOn: [], foundation: false, why: "libseccomp")),
      .init(subject: .target("CSodium"), rule: .init(mayDependOn: [], foundation: false, why: "libsodium")),
      .init(
        subject: .target("CMicroHTTPD"), rule: .init(mayDependOn: [], foundation: false, why: "libmicrohttpd")
      ),
      .init(
        subject: .target("CForsettiWeb"),
        rule: .init(
          mayDependOn: ["CMicroHTTPD"], foundation: false,
          why: "the libmicrohttpd calls Swift cannot make (C varargs) and the gathering of a request's body")),
      .init(subject: .target("CSystemd"), rule: .init(mayDependOn: [], foundation: false, why: "libsystemd")),
      .init(
        subject: .target("CForsettiJournal"),
        rule: .init(
          mayDependOn: ["CSystemd"], foundation: false,
          why: "sd_journal_sendv from libsystemd, opened when the journal is standard error")),
      .init(
        subject: .target("CLibDW"), rule: .init(mayDependOn: [], foundation: false, why: "elfutils' libdw")),
      .init(
        subject: .target("CForsettiDebug"),
        rule: .init(
          mayDependOn: ["CLibDW"], foundation: false,
          why: "libdwfl's C callbacks and walks for symbolizing a crash, libdw opened on first use")),
      .init(
        subject: .target("ForsettiCore"),
        rule: .init(
          mayDependOn: [], foundation: false,
          why: "pure rules, testable with plain values, linked into forsetti-worker")),
      .init(
        subject: .target("ForsettiBinary"),
        rule: .init(
          mayDependOn: ["ForsettiCore", "CLibElf", "CForsetti", "CSodium"], foundation: false,
          why: "ELF inspection, signatures and dlopen, linked into forsetti-worker")),
      .init(
        subject: .target("ForsettiBridge"),
        rule: .init(
          mayDependOn: ["ForsettiCore", "ForsettiBinary", "CForsetti", "CFFI", "CForsettiSys", "CSeccomp"],
          foundation: false,
          why: "what the host and forsetti-worker share; the worker links no Foundation")),
      .init(
        subject: .target("forsetti-worker"),
        rule: .init(
          mayDependOn: ["ForsettiBridge"], foundation: false,
          why: "one confined process per isolated module: no Foundation keeps its start and memory small"
        )),
      .init(
        subject: .target("ForsettiRuntime"),
        rule: .init(
          mayDependOn: [
            "ForsettiBridge", "ForsettiCore", "ForsettiBinary", "CForsetti", "CFFI", "CForsettiSys",
            "CSeccomp", "CSodium", "CForsettiJournal", "CForsettiDebug",
          ], foundation: true,
          why:
            "the host's lifecycle, supervision, services (keys and sealing: libsodium), reload, trust, crash reports"
        )),
      .init(
        subject: .target("ForsettiHost"),
        rule: .init(
          mayDependOn: [
            "ForsettiRuntime", "ForsettiCore", "ForsettiBinary", "ForsettiBridge", "CForsetti",
            "CForsettiSys", "CForsettiWeb",
          ],
          foundation: true,
          why: "the host as a value, what the command line and an embedding application compose "
            + "(its /metrics served through CForsettiWeb, its wake-ups an eventfd of CForsettiSys); "
            + "nothing of the runtime depends on it")),
      .init(
        subject: .target("ForsettiCLI"),
        rule: .init(
          mayDependOn: ["ForsettiHost", "ForsettiCore", "ForsettiBinary", "ForsettiRuntime", "CForsettiWeb"],
          foundation: true,
          why: "the command line is one client of the runtime; it never reaches into the bridge")),
      .init(
        subject: .target("CForsettiEmbed"),
        rule: .init(
          mayDependOn: ["CForsetti"], foundation: false,
          why: "the embedding C API's header (forsetti/embed.h), beside the module ABI it reuses")),
      .init(
        subject: .target("ForsettiEmbed"),
        rule: .init(
          mayDependOn: ["ForsettiHost", "ForsettiRuntime", "ForsettiCore", "CForsetti", "CForsettiEmbed"],
          foundation: true, why: "the C API over the facade, built as libforsetti-embed.so")),
      .init(
        subject: .target("forsetti-host"),
        rule: .init(mayDependOn: ["ForsettiCLI"], foundation: true, why: "the executable: main() only")),
      .init(
        subject: .target("forsetti-bench"),
        rule: .init(
          mayDependOn: ["ForsettiRuntime", "ForsettiBridge", "ForsettiBinary", "ForsettiCore", "CLibElf"],
          foundation: true, why: "the benchmark measures each layer directly")),
      .init(
        subject: .target("ForsettiSDK"),
        rule: .init(
          mayDependOn: ["CForsetti"], foundation: false,
          why: "module authors' Swift library: a module and the host meet only at forsetti.h")),
      .init(
        subject: .examples,
        rule: .init(
          mayDependOn: ["ForsettiSDK"], foundation: false,
          why: "example modules are built as a vendor would build them: on the SDK alone")),
      .init(
        subject: .target("ForsettiTestSupport"),
        rule: .init(
          mayDependOn: [], foundation: true,
          why: "fixtures usable by every test target, so they import nothing of the product")),
      .init(
        subject: .tests,
        rule: .init(
          mayDependOn: [
            "CForsetti", "CForsettiSys", "ForsettiCore", "ForsettiBinary", "ForsettiBridge",
            "ForsettiRuntime", "ForsettiHost",
            "ForsettiCLI", "ForsettiSDK", "ForsettiTestSupport",
          ], foundation: true, why: "tests use any library of the product and the fixtures")),
    ],
    platformModules: ["Swift", "_Concurrency", "_StringProcessing", "Glibc", "Dispatch", "Synchronization"],
    foundationModules: [
      "Foundation", "FoundationEssentials", "FoundationInternationalization", "FoundationNetworking",
      "FoundationXML", "CoreFoundation",
    ],
    testFrameworks: ["Testing", "XCTest"],
    testSupport: "ForsettiTestSupport")
}

// MARK: - The tests

@Suite struct ArchitectureTests {
  static var packageRoot: URL {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url
  }

  static func packageTargets() throws -> [PackageTarget] {
    let text = try String(contentsOf: packageRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
    return try PackageManifestReader.targets(in: text)
  }

  /// `name` and every target it depends on, directly or not, as Package.swift declares them.
  static func closure(of name: String, in targets: [PackageTarget]) -> Set<String> {
    let byName = Dictionary(targets.map { ($0.name, $0) }) { a, _ in a }
    var seen: Set<String> = [name]
    var queue = [name]
    while let next = queue.popLast() {
      for dep in byName[next]?.dependencies ?? [] where seen.insert(dep.name).inserted {
        queue.append(dep.name)
      }
    }
    return seen
  }

  @Test func theLayeringPointsDown() {
    #expect(Layering.forsetti.problems() == [])
  }

  /// The host facade is a layer of its own: the command line, the C API and the tests use it,
  /// nothing of the runtime or below does.
  @Test func onlyTheCommandLineTheCAPIAndTestsDependOnTheHostFacade() {
    let users = Layering.forsetti.rows.filter { $0.rule.mayDependOn.contains("ForsettiHost") }.map(\.subject)
    #expect(Set(users) == [.target("ForsettiCLI"), .target("ForsettiEmbed"), .tests])
  }

  /// The command line composes no host of its own: it configures `ForsettiHost` (a control that
  /// reads nothing would pass, so the facade's own sources must be found composing one).
  @Test func onlyTheFacadeComposesAHost() throws {
    let checker = ArchitectureChecker(root: Self.packageRoot, layering: .forsetti)
    let parts = ["LiveHost(", "ModuleManager(", "ControlServer(", "HostLock(", "StateDirectoryHold("]
    func composing(_ directory: String) throws -> [String] {
      try checker.swiftFiles(directory).flatMap { file in
        let text = try String(contentsOf: Self.packageRoot.appendingPathComponent(file), encoding: .utf8)
        return parts.filter { text.contains($0) }.map { "\(file): \($0)" }
      }
    }
    #expect(try composing("Sources/ForsettiCLI") == [])
    #expect(
      Set(try composing("Sources/ForsettiHost").map { $0.split(separator: " ").last.map(String.init) ?? "" })
        == Set(parts))
  }

  @Test func packageAndImportsFollowTheLayering() throws {
    let report = try ArchitectureChecker(root: Self.packageRoot, layering: .forsetti).check()
    let breaks = report.violations.map(\.description).joined(separator: "\n")
    #expect(report.violations.isEmpty, "\(report.violations.count) breaks of the layering:\n\(breaks)")
    // A check that read nothing would pass: it must have read every layer.
    #expect(report.targets.count >= 20, "targets read: \(report.targets.map(\.name))")
    #expect(report.imports >= 300, "only \(report.imports) imports read")
    for name in [
      "ForsettiCore", "ForsettiBinary", "ForsettiBridge", "ForsettiRuntime", "ForsettiHost", "ForsettiCLI",
      "ForsettiSDK", "forsetti-worker", "forsetti-host", "CounterModule", "ForsettiTestSupport",
      "ForsettiCoreTests",
    ] {
      #expect(report.files[name, default: 0] > 0, "no Swift file of \(name) was read")
    }
  }

  @Test func theReaderReadsThisPackage() throws {
    let targets = Dictionary(try Self.packageTargets().map { ($0.name, $0) }) { a, _ in a }
    #expect(targets["ForsettiCore"]?.dependencies == [])
    #expect(
      targets["ForsettiBinary"]?.dependencies.map(\.name) == [
        "ForsettiCore", "CLibElf", "CForsetti", "CSodium",
      ])
    #expect(targets["CLibElf"]?.kind == .systemLibrary)
    #expect(targets["forsetti-worker"]?.kind == .executableTarget)
    #expect(targets["CounterModule"]?.sourceDirectory == "Plugins/Counter")
    #expect(targets["ForsettiTestSupport"]?.sourceDirectory == "Tests/ForsettiTestSupport")
    #expect(targets["ForsettiCoreTests"]?.sourceDirectory == "Tests/ForsettiCoreTests")
  }

  /// The issue's rule: no Foundation in the worker, the bridge or the SDK. The worker's whole
  /// dependency closure counts, since it links all of it.
  @Test(arguments: ["forsetti-worker", "ForsettiSDK", "CounterModule", "DashboardModule", "ToolboxModule"])
  func linksNoFoundation(_ name: String) throws {
    let targets = try Self.packageTargets()
    let closure = Self.closure(of: name, in: targets)
    if name == "forsetti-worker" {
      #expect(closure.isSuperset(of: ["ForsettiBridge", "ForsettiBinary", "ForsettiCore"]))
    }
    let checker = ArchitectureChecker(root: Self.packageRoot, layering: .forsetti)
    for target in targets where closure.contains(target.name) {
      #expect(Layering.forsetti.rule(for: target)?.foundation == false, "\(target.name) may use Foundation")
      for file in try checker.swiftFiles(target.sourceDirectory) {
        let text = try String(contentsOf: Self.packageRoot.appendingPathComponent(file), encoding: .utf8)
        for statement in ImportScanner.imports(in: text) {
          #expect(
            !Layering.forsetti.foundationModules.contains(statement.module ?? ""),
            "\(file):\(statement.line): \(statement.text), linked into \(name)")
        }
      }
    }
  }

  @Test func testSupportImportsNothingOfTheProduct() throws {
    let checker = ArchitectureChecker(root: Self.packageRoot, layering: .forsetti)
    let l = Layering.forsetti
    let outside = l.platformModules.union(l.foundationModules).union(l.testFrameworks)
    let files = try checker.swiftFiles("Tests/ForsettiTestSupport")
    #expect(!files.isEmpty)
    for file in files {
      let text = try String(contentsOf: Self.packageRoot.appendingPathComponent(file), encoding: .utf8)
      for statement in ImportScanner.imports(in: text) {
        #expect(outside.contains(statement.module ?? ""), "\(file):\(statement.line): \(statement.text)")
      }
    }
  }

  /// The control plane belongs to the runtime (issue 29): the command line sends typed requests
  /// and renders answers, and never answers one itself: no server, no serving loop, no answer
  /// built: the `ForsettiHost` facade serves the socket with the runtime's `ControlAnswerer`.
  @Test func theCommandLineAnswersNoControlRequests() throws {
    let forbidden = [
      "ControlServer", ".serve(", "ControlAnswerer(host:", "ControlResponse(", "ControlRequest.decode",
      "ControlHandler", "CapturedConsole",
    ]
    let checker = ArchitectureChecker(root: Self.packageRoot, layering: .forsetti)
    let files = try checker.swiftFiles("Sources/ForsettiCLI")
    #expect(files.count > 20, "read \(files.count) files of the CLI")
    var found: [String] = []
    for file in files {
      let text = try String(contentsOf: Self.packageRoot.appendingPathComponent(file), encoding: .utf8)
      let code = SwiftText.blanked(text, strings: true)
      for word in forbidden where code.contains(word) { found.append("\(file): \(word)") }
    }
    #expect(found.isEmpty, "the command line answers control requests:\n\(found.joined(separator: "\n"))")
    // Positive control: the words are found where they are (the runtime answers).
    let answerer = try String(
      contentsOf: Self.packageRoot.appendingPathComponent(
        "Sources/ForsettiRuntime/Control/ControlAnswerer.swift"),
      encoding: .utf8)
    #expect(SwiftText.blanked(answerer, strings: true).contains("ControlResponse("))
  }

  // MARK: The checker fails when it should

  /// A miniature of the package: a pure core, a bridge shared with a Foundation-free worker, a
  /// runtime, fixtures and a test target.
  static let miniature = Layering(
    rows: [
      .init(subject: .target("Core"), rule: .init(mayDependOn: [], foundation: false, why: "pure rules")),
      .init(
        subject: .target("Bridge"),
        rule: .init(mayDependOn: ["Core"], foundation: false, why: "the worker links no Foundation")),
      .init(
        subject: .target("Runtime"), rule: .init(mayDependOn: ["Bridge", "Core"], foundation: true, why: "")),
      .init(subject: .target("Support"), rule: .init(mayDependOn: [], foundation: true, why: "fixtures")),
      .init(
        subject: .tests, rule: .init(mayDependOn: ["Core", "Bridge", "Support"], foundation: true, why: "")),
    ],
    platformModules: Layering.forsetti.platformModules,
    foundationModules: Layering.forsetti.foundationModules,
    testFrameworks: Layering.forsetti.testFrameworks, testSupport: "Support")

  static func package(
    core: String = "", runtime: String = "[.target(name: \"Bridge\"), \"Core\"]", extra: String = ""
  )
    -> String
  {
    """
    // swift-tools-version:6.0
    import PackageDescription

    let package = Package(
      name: "miniature",
      products: [.library(name: "Core", targets: ["Core"])],
      targets: [
        .target(name: "Core"\(core)),
        // A comment with .target(name: "Ghost") is no target.
        .target(name: "Bridge", dependencies: ["Core"]),
        .target(
          name: "Runtime",
          dependencies: \(runtime)),
        .target(name: "Support", path: "Tests/Support"),
        .testTarget(name: "CoreTests", dependencies: ["Core", "Support"]),\(extra)
      ]
    )

    """
  }

  static let cleanTree: [String: String] = [
    "Package.swift": package(),
    "Sources/Core/Rules.swift": "import Glibc\nimport Synchronization\n",
    "Sources/Bridge/Frames.swift": "import Core\nimport Glibc\n",
    "Sources/Runtime/Host.swift": "import Bridge\nimport Core\nimport Foundation\n",
    "Tests/Support/Fixture.swift": "import Foundation\n",
    "Tests/CoreTests/RulesTests.swift": "@testable import Core\nimport Support\nimport Testing\n",
  ]

  /// The clean tree changed by `changes`, checked against the miniature layering; each
  /// violation as `file:line what`.
  static func violations(_ changes: [String: String]) throws -> [String] {
    let dir = TemporaryDirectory("architecture")
    for (path, text) in cleanTree.merging(changes, uniquingKeysWith: { $1 }) { try dir.write(path, text) }
    let report = try ArchitectureChecker(root: URL(fileURLWithPath: dir.path), layering: miniature).check()
    return report.violations.map { "\($0.file):\($0.line) \($0.what) — \($0.rule)" }
  }

  @Test func theMiniatureIsClean() throws {
    #expect(Self.miniature.problems() == [])
    #expect(try Self.violations([:]) == [])
  }

  @Test func foundationInABridgeLikeTargetIsReported() throws {
    let found = try Self.violations([
      "Sources/Bridge/Frames.swift": """
      import Core
      // import Foundation: a comment is no import
      let template = "import Foundation"
      #if canImport(Foundation)
        import Foundation
      #endif
      let raw = #\"""
        import Foundation
        \"""#
      internal import struct FoundationEssentials.Date

      """
    ])
    #expect(found.count == 2, "\(found)")
    #expect(
      found.first?.hasPrefix(
        "Sources/Bridge/Frames.swift:5 `import Foundation` — Bridge may not import Foundation") == true,
      "\(found)")
    #expect(
      found.last?.hasPrefix(
        "Sources/Bridge/Frames.swift:10 `internal import struct FoundationEssentials.Date` — "
          + "Bridge may not import FoundationEssentials"
      ) == true, "\(found)")
  }

  @Test func anUpwardDependencyIsReported() throws {
    let found = try Self.violations([
      "Package.swift": Self.package(core: ", dependencies: [\"Bridge\"]"),
      "Sources/Core/Rules.swift": "@testable import Runtime\n",
    ])
    #expect(found.count == 2, "\(found)")
    #expect(
      found.contains { $0.hasPrefix("Package.swift:8 Core depends on Bridge — upward or sideways") },
      "\(found)")
    #expect(
      found.contains {
        $0.hasPrefix("Sources/Core/Rules.swift:1 `@testable import Runtime` — upward or sideways")
      },
      "\(found)")
  }

  @Test func anUndeclaredImportIsReported() throws {
    let found = try Self.violations(["Package.swift": Self.package(runtime: "[\"Bridge\"]")])
    #expect(found.count == 1, "\(found)")
    #expect(
      found.first?.hasPrefix(
        "Sources/Runtime/Host.swift:2 `import Core` — Core is not among the dependencies") == true)
  }

  @Test func productCodeUsingTestCodeIsReported() throws {
    let found = try Self.violations([
      "Sources/Runtime/Host.swift": "import Bridge\nimport Support\nimport Testing\n",
      "Tests/Support/Fixture.swift": "import Foundation\nimport Core\n",
    ])
    #expect(
      found == [
        "Sources/Runtime/Host.swift:2 `import Support` — "
          + "product code never uses test code (Support or a test target)",
        "Sources/Runtime/Host.swift:3 `import Testing` — product code never imports a test framework",
        "Tests/Support/Fixture.swift:2 `import Core` — "
          + "Support imports nothing of the product, so every test target can use it",
      ])
  }

  @Test func anUnknownModuleIsReported() throws {
    let found = try Self.violations([
      "Sources/Bridge/Frames.swift": "import Core\n@_implementationOnly import NIOCore\n"
    ])
    #expect(found.count == 1, "\(found)")
    #expect(
      found.first?.hasPrefix(
        "Sources/Bridge/Frames.swift:2 `@_implementationOnly import NIOCore` — NIOCore is neither") == true)
  }

  @Test func aTargetWithoutARowOrADirectoryWithoutATargetIsReported() throws {
    let found = try Self.violations([
      "Package.swift": Self.package(extra: "\n    .target(name: \"Extra\", dependencies: [\"Core\"]),"),
      "Sources/Extra/Extra.swift": "import Core\n",
      "Sources/Ghost/Ghost.swift": "import Core\n",
    ])
    #expect(found.count == 2, "\(found)")
    #expect(
      found.contains { $0.hasPrefix("Package.swift:16 target Extra — no row of the layering covers it") },
      "\(found)")
    #expect(
      found.contains { $0.hasPrefix("Sources/Ghost:0 directory Sources/Ghost — no target") }, "\(found)")
  }

  @Test(arguments: [
    (".target(name: coreName),", "the name `coreName` is not a string literal"),
    (".target(name: \"Core\", dependencies: coreDependencies),", "are not a literal array"),
    (".target(name: \"Core\", dependencies: [Dependency.core]),", "the dependency `Dependency.core`"),
    ("coreTarget,", "`coreTarget` is not a `.target(…)`-style call"),
    (".plugin2(name: \"Core\"),", "`.plugin2(…)` is none of"),
  ])
  func aTargetTheReaderCannotTakeApartStopsTheCheck(_ declaration: String, _ problem: String) throws {
    let text = Self.package().replacingOccurrences(of: ".target(name: \"Core\"),", with: declaration)
    #expect(text.contains(declaration))
    do {
      _ = try PackageManifestReader.targets(in: text)
      Issue.record("\(declaration) was read")
    } catch {
      #expect(error.line == 8, "\(error)")
      #expect(error.description.contains(problem), "\(error)")
    }
  }

  @Test func importsAreReadWhereSwiftReadsThem() {
    let source = #"""
      import Glibc
      @testable import ForsettiCore
      @_spi(Testing) public import ForsettiBinary
      import struct ForsettiBridge.WireFrame; import Dispatch
      /* import Commented
         /* nested */ import StillCommented */
      let text = "import Quoted"
      let escaped = "\"import Escaped\""
      let block = """
        import InsideBlock
        """
      #if canImport(Foundation)
        package import Foundation
      #endif
      import
      func f() { let x = "a // not a comment"; _ = x }
      """#
    let found = ImportScanner.imports(in: source).map { "\($0.line):\($0.module ?? "?")" }
    #expect(
      found == [
        "1:Glibc", "2:ForsettiCore", "3:ForsettiBinary", "4:ForsettiBridge", "4:Dispatch", "13:Foundation",
        "15:?",
      ])
  }
}

// MARK: - The lifecycle without a hub

/// The runtime's folders, held to what the redesign removed: the manager extended only in its
/// own folder, Isolation and Reload naming nothing of the lifecycle, a slot changed only by its
/// own methods and reached by handle, one place deciding how a worker ended, one confinement
/// codec.
@Suite struct RuntimeFolderTests {
  static let runtime = "Sources/ForsettiRuntime"

  /// Every Swift file under `folder`, relative to the package, with its text without comments.
  static func sources(_ folder: String) throws -> [(path: String, code: String)] {
    let root = ArchitectureTests.packageRoot
    let dir = root.appendingPathComponent(folder)
    let files = try #require(FileManager.default.enumerator(at: dir, includingPropertiesForKeys: nil))
    var out: [(String, String)] = []
    for case let url as URL in files where url.pathExtension == "swift" {
      let text = try String(contentsOf: url, encoding: .utf8)
      let code = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
        line.range(of: "//").map { String(line[..<$0.lowerBound]) } ?? String(line)
      }.joined(separator: "\n")
      out.append((String(url.path.dropFirst(root.path.count + 1)), code))
    }
    return out.sorted { $0.0 < $1.0 }
  }

  static func names(_ word: String, in code: String) -> Bool {
    code.range(of: "\\b\(word)\\b", options: .regularExpression) != nil
  }

  /// No file extends `ModuleManager`: a part of the lifecycle is a type given the module table
  /// and what else it needs (`Supervision`, `Reload`, `Reconciler`, …), not a file of members.
  @Test func theManagerIsExtendedNowhere() throws {
    let all = try Self.sources(Self.runtime)
    func extending(_ type: String) -> [String] {
      all.filter {
        $0.code.range(of: #"(?m)^\s*extension\s+"# + type + #"\b"#, options: .regularExpression) != nil
      }.map(\.path)
    }
    // The positive control: the scan finds an extension that is there.
    #expect(extending("WorkerProcess") == [Self.runtime + "/Isolation/WorkerProtocol.swift"])
    #expect(extending("ModuleManager").isEmpty, "extensions of ModuleManager: \(extending("ModuleManager"))")
  }

  /// The folder loops Lifecycle↔Isolation and Lifecycle↔Reload: Isolation and Reload are used
  /// by the lifecycle and name nothing of it.
  @Test(arguments: ["Isolation", "Reload"])
  func aFolderBelowTheLifecycleNamesNothingOfIt(_ folder: String) throws {
    let lifecycle = try Self.sources(Self.runtime + "/Lifecycle")
    var types: [String] = []
    for (_, code) in lifecycle {
      let found = code.matches(
        of:
          /(?m)^(?:public |package |final |private |fileprivate )*(?:class|struct|enum|protocol)\s+([A-Z][A-Za-z0-9]*)/
      )
      types += found.map { String($0.output.1) }
    }
    #expect(types.contains("ModuleManager") && types.contains("SlotHandle"), "types read: \(types)")
    for (path, code) in try Self.sources(Self.runtime + "/" + folder) {
      let named = types.filter { Self.names($0, in: code) }
      #expect(named.isEmpty, "\(path) names the lifecycle's \(named)")
    }
  }

  /// `ModuleSlot`'s promise: its stored state is `private(set)` (or `let`), so only its own
  /// methods change it; and the table is reached by handle, never by an integer.
  @Test func aSlotChangesOnlyThroughItsMethods() throws {
    let lifecycle = try Self.sources(Self.runtime + "/Lifecycle")
    let slot = try #require(lifecycle.first { $0.path.hasSuffix("/ModuleSlot.swift") }).code
    let body =
      try #require(slot.components(separatedBy: "struct ModuleSlot {").last)
      .components(separatedBy: "\n}\n").first ?? ""
    let stored = body.split(separator: "\n").filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
      .filter { $0.contains("var ") && !$0.contains("{") && !$0.contains("func ") }
    #expect(!stored.isEmpty, "no stored property of ModuleSlot was read")
    for line in stored {
      #expect(line.contains("private(set) var") || line.contains("private var"), "\(line)")
    }
    let table = try #require(lifecycle.first { $0.path.hasSuffix("/ModuleTable.swift") }).code
    #expect(table.contains("subscript(h: SlotHandle)"))
    #expect(!table.contains(": Int) -> ModuleSlot"), "ModuleTable is reached by an integer")
    for (path, code) in try Self.sources(Self.runtime) where !path.hasSuffix("/ModuleTable.swift") {
      #expect(!code.contains("table.slots["), "\(path) reaches into the table's storage")
    }
  }

  /// How a worker ended is decided by `WorkerEnding.classify`, reached through `finish()`;
  /// the confinement report has one codec.
  @Test func oneRuleForAnEndAndOneConfinementCodec() throws {
    let runtime = try Self.sources(Self.runtime)
    let finishing = runtime.filter { $0.code.contains(".finish()") || $0.code.contains(" finish()") }
    #expect(finishing.count >= 3, "sites using finish(): \(finishing.map(\.path))")
    for (path, code) in runtime where !path.hasSuffix("/WorkerEnding.swift") {
      #expect(!code.contains("describe(status:"), "\(path) words a wait status itself")
      #expect(!code.contains("\"capabilitiesDropped\""), "\(path) reads the confinement report itself")
    }
  }
}
