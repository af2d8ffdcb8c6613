// swift-tools-version:6.0
import Foundation
import PackageDescription

// The libFuzzer targets, a package of their own so that the sanitizer build (scripts/fuzz
// passes -sanitize=fuzzer,address to every Swift module) lives in Fuzz/.build and never touches
// the project's build. Each target only feeds libFuzzer's input to a `*FuzzEntry` of the library
// it tests; the regression tests replay the corpora through the same entries.

// A path dependency's identity is its directory's name, which differs between clones and
// worktrees; `.product(package:)` must name it.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
let forsetti = root.lastPathComponent.lowercased()

let package = Package(
  name: "forsetti-fuzz",
  dependencies: [.package(path: root.path)],
  targets: [
    .target(name: "CFuzzDriver"),
    .target(name: "FuzzSupport", dependencies: ["CFuzzDriver"]),
    .executableTarget(
      name: "fuzz-elf", dependencies: ["FuzzSupport", .product(name: "ForsettiBinary", package: forsetti)]),
    .executableTarget(
      name: "fuzz-elfversions",
      dependencies: ["FuzzSupport", .product(name: "ForsettiBinary", package: forsetti)]),
    .executableTarget(
      name: "fuzz-ldcache",
      dependencies: ["FuzzSupport", .product(name: "ForsettiBinary", package: forsetti)]),
    .executableTarget(
      name: "fuzz-manifest", dependencies: ["FuzzSupport", .product(name: "ForsettiCore", package: forsetti)]),
    .executableTarget(
      name: "fuzz-control",
      dependencies: ["FuzzSupport", .product(name: "ForsettiCore", package: forsetti)]),
    .executableTarget(
      name: "fuzz-policy", dependencies: ["FuzzSupport", .product(name: "ForsettiCore", package: forsetti)]),
    .executableTarget(
      name: "fuzz-crash", dependencies: ["FuzzSupport", .product(name: "ForsettiBridge", package: forsetti)]),
    .executableTarget(
      name: "fuzz-wire", dependencies: ["FuzzSupport", .product(name: "ForsettiBridge", package: forsetti)]),
  ]
)
