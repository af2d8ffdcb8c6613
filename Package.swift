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

    // The command line: argument parsing, verbs, human and JSON output, exit codes.
    .target(name: "ForsettiCLI", dependencies: ["ForsettiCore"]),
    .executableTarget(name: "forsetti-host", dependencies: ["ForsettiCLI"]),

    .testTarget(name: "ForsettiCoreTests", dependencies: ["ForsettiCore"]),
    .testTarget(
      name: "ForsettiCLITests", dependencies: ["ForsettiCLI", "ForsettiCore"]),
  ]
)
