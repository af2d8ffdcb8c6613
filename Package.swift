// swift-tools-version:6.0
import PackageDescription

// Layers of docs/architecture.md (enforced by Tests/ForsettiCoreTests/ArchitectureTests.swift);
// dependencies point down only.
let package = Package(
  name: "forsetti",
  products: [
    .executable(name: "forsetti-host", targets: ["forsetti-host"]),
    .executable(name: "forsetti-worker", targets: ["forsetti-worker"]),
    .library(name: "ForsettiCore", targets: ["ForsettiCore"]),
    .library(name: "ForsettiSDK", targets: ["ForsettiSDK"]),
    // For the fuzzers in Fuzz/, a package of their own that builds these with libFuzzer.
    .library(name: "ForsettiBinary", targets: ["ForsettiBinary"]),
    .library(name: "ForsettiBridge", targets: ["ForsettiBridge"]),
    .library(name: "ForsettiCLI", targets: ["ForsettiCLI"]),
    // The host inside an application: the Swift facade, and the C API over it (forsetti/embed.h).
    .library(name: "ForsettiHost", targets: ["ForsettiHost"]),
    .library(name: "forsetti-embed", type: .dynamic, targets: ["ForsettiEmbed"]),
    // The example modules, built as the .so files a vendor would ship.
    .library(name: "CounterModule", type: .dynamic, targets: ["CounterModule"]),
    .library(name: "DashboardModule", type: .dynamic, targets: ["DashboardModule"]),
    .library(name: "ToolboxModule", type: .dynamic, targets: ["ToolboxModule"]),
  ],
  targets: [
    // Pure rules: manifest model and validation, versions, capabilities, gates. No dlopen, no processes.
    .target(name: "ForsettiCore"),

    // libelf through pkg-config; a shim only where libelf's API is macros.
    .systemLibrary(
      name: "CLibElf", pkgConfig: "libelf", providers: [.apt(["libelf-dev"])]),
    // elfutils' libdw: symbolizing a worker's crash. Its headers only: the shim opens the
    // library when a crash is symbolized (as for libmicrohttpd below).
    .systemLibrary(name: "CLibDW", providers: [.apt(["libdw-dev"])]),
    .target(name: "CForsettiDebug", dependencies: ["CLibDW"]),

    // ELF inspection without loading (libelf); later dlopen and unique-copy loading.
    .target(name: "ForsettiBinary", dependencies: ["ForsettiCore", "CLibElf", "CForsetti", "CSodium"]),
    // libsodium: Ed25519 for signed licences and signed modules.
    .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),

    // The module ABI: forsetti.h and its headers. The only thing modules compile against.
    .target(name: "CForsetti"),

    // libffi, and the Linux system calls glibc does not wrap (openat2).
    .systemLibrary(name: "CFFI", pkgConfig: "libffi", providers: [.apt(["libffi-dev"])]),
    .target(name: "CForsettiSys"),
    .systemLibrary(name: "CSeccomp", pkgConfig: "libseccomp", providers: [.apt(["libseccomp-dev"])]),
    // libmicrohttpd: the debug screen's HTTP server (never a parser of ours on network input),
    // and the few of its calls Swift cannot make (C varargs) in a shim of their own. Its header
    // only: the shim opens the library when the debug screen starts (no pkg-config, no link).
    .systemLibrary(name: "CMicroHTTPD", providers: [.apt(["libmicrohttpd-dev"])]),
    .target(name: "CForsettiWeb", dependencies: ["CMicroHTTPD"]),
    // libsystemd: the journal's sd_journal_sendv for structured records when standard error is
    // the journal. Its header only, as for libmicrohttpd: the shim opens the library when used.
    .systemLibrary(name: "CSystemd", providers: [.apt(["libsystemd-dev"])]),
    .target(name: "CForsettiJournal", dependencies: ["CSystemd"]),

    // What the host and the confined worker share, without Foundation (the worker links nothing
    // more, which keeps its start and memory small): the host table bound to one module with
    // libffi, sandbox storage, the worker's confinement, wire format, call ring and main loop.
    .target(
      name: "ForsettiBridge",
      dependencies: ["ForsettiCore", "ForsettiBinary", "CForsetti", "CFFI", "CForsettiSys", "CSeccomp"]),
    // Lifecycle, supervision, services (events, messages, telemetry, logs), hot reload, trust.
    .target(
      name: "ForsettiRuntime",
      dependencies: [
        "ForsettiBridge", "ForsettiCore", "ForsettiBinary", "CForsetti", "CFFI", "CForsettiSys", "CSeccomp",
        "CSodium", "CForsettiJournal", "CForsettiDebug",
      ]),

    // The host as a value (ForsettiHost): what the command line's run and dev, and an application
    // embedding the host, compose; it re-exports what an embedder needs.
    .target(
      name: "ForsettiHost",
      dependencies: [
        "ForsettiRuntime", "ForsettiBridge", "ForsettiCore", "CForsetti", "CForsettiSys", "CForsettiWeb",
      ]),
    // The C API over ForsettiHost: forsetti/embed.h, and its implementation, built as
    // libforsetti-embed.so.
    .target(name: "CForsettiEmbed", dependencies: ["CForsetti"]),
    .target(
      name: "ForsettiEmbed",
      dependencies: ["ForsettiHost", "ForsettiRuntime", "ForsettiCore", "CForsetti", "CForsettiEmbed"],
      // SwiftPM names no SONAME; a program linked with -lforsetti-embed should record the
      // library's name, not the path it was linked from.
      linkerSettings: [.unsafeFlags(["-Xlinker", "-soname=libforsetti-embed.so"])]),

    // Swift conveniences for module authors, built on forsetti.h only (never the host's modules).
    .target(name: "ForsettiSDK", dependencies: ["CForsetti"]),
    .target(
      name: "CounterModule", dependencies: ["ForsettiSDK"], path: "Plugins/Counter", exclude: ["README.md"]),
    .target(
      name: "DashboardModule", dependencies: ["ForsettiSDK"], path: "Plugins/Dashboard",
      exclude: ["README.md"]),
    .target(
      name: "ToolboxModule", dependencies: ["ForsettiSDK"], path: "Plugins/Toolbox", exclude: ["README.md"]),

    // The command line: argument parsing, verbs, human and JSON output, exit codes.
    // The debug screen's page is compiled into the host (no resource bundle to install beside it).
    .target(
      name: "ForsettiCLI",
      dependencies: ["ForsettiHost", "ForsettiCore", "ForsettiBinary", "ForsettiRuntime", "CForsettiWeb"],
      resources: [
        .embedInCode("Web/Assets/index.html"), .embedInCode("Web/Assets/app.js"),
        .embedInCode("Web/Assets/app.css"),
      ]),
    // The Swift runtime and FoundationEssentials linked in, as scripts/package builds it: a whole
    // `run` loads a dozen libraries fewer and maps only what it uses (issue 30's start-up and
    // peak RSS). Modules loaded in-process bring their own runtime; they meet the host only at
    // forsetti.h. FoundationEssentials' own parts are named: the modules importing it were
    // compiled against the shared runtime, whose library holds them.
    .executableTarget(
      name: "forsetti-host", dependencies: ["ForsettiCLI"],
      linkerSettings: [
        .unsafeFlags(["-static-stdlib"]), .linkedLibrary("_FoundationCollections"),
        .linkedLibrary("_FoundationCShims"),
      ]),
    // One confined process per isolated module, spawned by the host.
    .executableTarget(name: "forsetti-worker", dependencies: ["ForsettiBridge"]),
    // The benchmark (scripts/bench builds it in release mode).
    .executableTarget(
      name: "forsetti-bench",
      dependencies: ["ForsettiRuntime", "ForsettiBridge", "ForsettiBinary", "ForsettiCore", "CLibElf"]),

    .testTarget(name: "ForsettiCoreTests", dependencies: ["ForsettiCore", "ForsettiTestSupport"]),
    // Real fixtures for tests: temporary directories, C sources compiled with cc, processes.
    .target(name: "ForsettiTestSupport", path: "Tests/ForsettiTestSupport"),
    .testTarget(
      name: "ForsettiBinaryTests", dependencies: ["ForsettiBinary", "ForsettiCore", "ForsettiTestSupport"]),
    .testTarget(
      name: "ForsettiRuntimeTests",
      dependencies: [
        "ForsettiRuntime", "ForsettiBridge", "ForsettiBinary", "ForsettiCore", "CForsetti", "CForsettiSys",
        "ForsettiTestSupport",
      ]),
    // The SDK's own logic (status mapping, role handler buffers) against host tables faked in Swift.
    .testTarget(name: "ForsettiSDKTests", dependencies: ["ForsettiSDK", "CForsetti"]),
    // The facade and the C API as an application meets them, and what they keep out of its sight.
    .testTarget(name: "ForsettiHostTests", dependencies: ["ForsettiHost", "ForsettiTestSupport"]),
    .testTarget(
      name: "ForsettiCLITests",
      dependencies: [
        "ForsettiCLI", "ForsettiHost", "ForsettiRuntime", "ForsettiCore", "ForsettiBinary",
        "ForsettiTestSupport",
      ]),
  ]
)
