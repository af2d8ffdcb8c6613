// swift-tools-version:6.0
import PackageDescription

// Layers of ../shared/DESIGN.md; dependencies point down only.
let package = Package(
  name: "forsetti",
  products: [
    .executable(name: "forsetti-host", targets: ["forsetti-host"]),
    .library(name: "ForsettiCore", targets: ["ForsettiCore"]),
  ],
  targets: [
    // Pure rules: manifest model and validation, versions, capabilities, gates. No dlopen, no processes.
    .target(name: "ForsettiCore"),

    // libelf through pkg-config; a shim only where libelf's API is macros.
    .systemLibrary(
      name: "CLibElf", pkgConfig: "libelf", providers: [.apt(["libelf-dev"])]),

    // ELF inspection without loading (libelf); later dlopen and unique-copy loading.
    .target(name: "ForsettiBinary", dependencies: ["ForsettiCore", "CLibElf"]),

    // The command line: argument parsing, verbs, human and JSON output, exit codes.
    .target(name: "ForsettiCLI", dependencies: ["ForsettiCore", "ForsettiBinary"]),
    .executableTarget(name: "forsetti-host", dependencies: ["ForsettiCLI"]),

    .testTarget(name: "ForsettiCoreTests", dependencies: ["ForsettiCore"]),
    // Real fixtures for tests: temporary directories, C sources compiled with cc, processes.
    .target(name: "ForsettiTestSupport", path: "Tests/ForsettiTestSupport"),
    .testTarget(
      name: "ForsettiBinaryTests", dependencies: ["ForsettiBinary", "ForsettiCore", "ForsettiTestSupport"]),
    .testTarget(
      name: "ForsettiCLITests", dependencies: ["ForsettiCLI", "ForsettiCore", "ForsettiTestSupport"]),
  ]
)
