import Foundation
import Testing

@testable import ForsettiCore

/// The fast path must never disagree with the full decoder: for any bytes it either answers
/// nil (the full path decides) or exactly the manifest the full path decodes.
@Suite struct ManifestFastPathTests {
  /// The full path alone: parse the tree, then decode it.
  static func full(_ bytes: [UInt8]) -> ModuleManifest? {
    guard let value = try? JSONParser.parse(bytes), ManifestDecoder.looksLikeManifest(value) else {
      return nil
    }
    return try? ManifestDecoder.decode(value).get()
  }

  /// Whether the two paths agree on `bytes`; records an issue naming `label` when not.
  @discardableResult
  static func agree(_ bytes: [UInt8], _ label: String) -> Bool {
    guard let fast = ManifestFastPath.decode(bytes) else { return true }
    let slow = full(bytes)
    #expect(
      slow == fast,
      "\(label): fast path decoded \(fast), full path \(slow.map(String.init(describing:)) ?? "rejects it")")
    return slow == fast
  }

  static func shipped() throws -> [(String, [UInt8])] {
    try ManifestSchemaTests.Fixture.shippedManifestNames().map { name in
      (
        name,
        try ManifestSchemaTests.Fixture.bytes(
          ManifestSchemaTests.Fixture.manifestsDirectory.appendingPathComponent(name))
      )
    }
  }

  /// The schema tests' base manifest without `runtimeRequirements`, which the fast path leaves
  /// to the full one, so the edits below reach it.
  static func base() throws -> JSONValue {
    var doc = try ManifestSchemaTests.Fixture.base()
    if case .object(var o) = doc {
      o["runtimeRequirements"] = nil
      doc = .object(o)
    }
    return doc
  }

  @Test func decodesTheShippedManifestsWithoutRuntimeRequirementsItself() throws {
    for (name, bytes) in try Self.shipped() {
      let expected = try #require(Self.full(bytes), "\(name) is not valid")
      if expected.runtimeRequirements == nil {
        #expect(ManifestFastPath.decode(bytes) == expected, "\(name)")
      } else {
        #expect(ManifestFastPath.decode(bytes) == nil, "\(name): runtimeRequirements belong to the full path")
      }
    }
    let base = Array(JSONWriter.string(try Self.base(), pretty: true).utf8)
    #expect(ManifestFastPath.decode(base) != nil)
    #expect(ManifestFastPath.decode(base) == Self.full(base))
  }

  @Test func agreesOnEverySchemaCase() throws {
    let base = try Self.base()
    var decodedByFastPath = 0
    let cases =
      ManifestSchemaTests.invalidCases + ManifestSchemaTests.validCases + ManifestSchemaTests.knownGaps
    for c in cases {
      guard let doc = c.apply(to: base) else { continue }
      let bytes = Array(JSONWriter.string(doc, pretty: false).utf8)
      // Cases that are invalid only through runtimeRequirements are valid here; `agree`
      // holds the fast path to the full decoder's verdict on this very document.
      Self.agree(bytes, c.name)
      if ManifestFastPath.decode(bytes) != nil { decodedByFastPath += 1 }
    }
    // The valid variants without runtimeRequirements edits are the fast path's to decode.
    #expect(decodedByFastPath >= 10)
  }

  /// Every single-byte deletion and many single-byte replacements of real manifests.
  @Test func agreesOnEveryOneByteMutation() throws {
    let replacements: [UInt8] = Array("\"\\{}[],:0.ea _".utf8) + [0x00, 0xC3, 0xFF]
    var sources = try Self.shipped().map(\.1)
    sources.append(Array(JSONWriter.string(try Self.base(), pretty: false).utf8))
    var compared = 0
    var fastDecoded = 0
    for source in sources {
      for i in source.indices {
        var cut = source
        cut.remove(at: i)
        var variants = [cut]
        for r in replacements where r != source[i] {
          var v = source
          v[i] = r
          variants.append(v)
        }
        for v in variants {
          compared += 1
          if ManifestFastPath.decode(v) != nil { fastDecoded += 1 }
          guard Self.agree(v, "byte \(i) of a \(source.count)-byte manifest") else { return }
        }
      }
    }
    // Mutations inside string values and whitespace keep manifests valid: the fast path must
    // have decoded a good share of them itself, or this test would prove nothing.
    #expect(compared > 10_000)
    #expect(fastDecoded > 500)
  }
}
