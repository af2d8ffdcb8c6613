import ForsettiCore
import Foundation
import Testing

/// docs/manifest.md names, in backticks, every property of the manifest JSON Schema and every
/// capability, so the reference cannot silently fall behind the schema or the model.
@Suite struct ManifestReferenceTests {
  static var packageRoot: URL {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url
  }

  static func reference() throws -> String {
    try String(contentsOf: packageRoot.appendingPathComponent("docs/manifest.md"), encoding: .utf8)
  }

  static func schema() throws -> JSONValue {
    let url = packageRoot.appendingPathComponent("manifests/schema/forsetti-manifest.schema.json")
    return try JSONParser.parse([UInt8](try Data(contentsOf: url)))
  }

  /// Every key of every "properties" object in `value`, at any depth: the root, nested objects,
  /// `if`/`then` branches and the definitions under `$defs` (or `definitions`) alike.
  static func propertyNames(in value: JSONValue) -> Set<String> {
    var names = Set<String>()
    if let object = value.objectValue {
      if let properties = object["properties"]?.objectValue {
        names.formUnion(properties.keys)
      }
      for member in object.members {
        names.formUnion(propertyNames(in: member.value))
      }
    } else if let items = value.arrayValue {
      for item in items {
        names.formUnion(propertyNames(in: item))
      }
    }
    return names
  }

  /// The names of `names` that `text` does not show in backticks, sorted.
  static func missing(_ names: some Sequence<String>, from text: String) -> [String] {
    names.filter { !text.contains("`\($0)`") }.sorted()
  }

  @Test func everySchemaPropertyIsDocumented() throws {
    let names = Self.propertyNames(in: try Self.schema())
    // Guard against a walk that finds nothing (and so passes vacuously).
    #expect(names.isSuperset(of: ManifestDecoder.rootKeys), "schema walk found: \(names.sorted())")
    #expect(names.isSuperset(of: ["major", "requirementID", "toolbarItemIDs", "requiredDefaultRoles"]))
    let absent = Self.missing(names, from: try Self.reference())
    #expect(absent.isEmpty, "docs/manifest.md does not mention in backticks: \(absent)")
  }

  @Test func everyCapabilityIsDocumented() throws {
    let absent = Self.missing(Capability.allCases.map(\.rawValue), from: try Self.reference())
    #expect(absent.isEmpty, "docs/manifest.md does not mention in backticks: \(absent)")
  }
}
