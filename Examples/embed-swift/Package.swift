// swift-tools-version:6.0
import PackageDescription

// An application that embeds the Forsetti host: it depends on the ForsettiHost product of the
// repository's package (two directories up) and on nothing else.
let package = Package(
  name: "embed-example",
  dependencies: [.package(name: "forsetti", path: "../..")],
  targets: [
    .executableTarget(
      name: "embed-example",
      dependencies: [.product(name: "ForsettiHost", package: "forsetti")])
  ]
)
