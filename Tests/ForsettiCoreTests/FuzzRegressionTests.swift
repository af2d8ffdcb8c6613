import ForsettiCore
import ForsettiTestSupport
import Testing

/// The manifest fuzzer's kept inputs (seeds in Fuzz/Corpus/manifest, crashes it found in
/// Fuzz/Regressions/manifest), replayed through the fuzzer's own entry in a normal build: every
/// file must be parsed and decoded without a trap and break none of the entry's properties.
@Suite struct ManifestFuzzRegressionTests {
  static func inputs(_ folder: String) -> [String] { FuzzInputs.paths(folder, "manifest") }

  @Test func theSeedCorpusIsThere() {
    #expect(Self.inputs("Corpus").count >= 3, "Fuzz/Corpus/manifest holds the seed manifests")
  }

  @Test func theShippedManifestsAreSeeds() {
    // The manifests the repository ships decode, so the corpus starts from valid documents.
    for path in Self.inputs("Corpus")
    where ["counter.json", "dashboard.json", "hello-c.json"].contains(where: path.hasSuffix) {
      let bytes = PlainFiles.contents(of: path) ?? []
      #expect((try? ManifestDecoder.decode(bytes: bytes).get()) != nil, "\(path)")
    }
  }

  @Test(arguments: inputs("Corpus") + inputs("Regressions"))
  func replays(_ path: String) throws {
    let bytes = try #require(PlainFiles.contents(of: path), "\(path) is readable")
    #expect(ManifestFuzzEntry.run(bytes) == [], "\(path)")
  }
}

/// The control fuzzer's kept inputs (Fuzz/Corpus/control, Fuzz/Regressions/control), replayed
/// through its entry: a request or answer line never traps and re-encodes to itself.
@Suite struct ControlFuzzRegressionTests {
  static func inputs(_ folder: String) -> [String] { FuzzInputs.paths(folder, "control") }

  @Test func theSeedCorpusIsThere() {
    #expect(Self.inputs("Corpus").count >= 5, "Fuzz/Corpus/control holds request and answer lines")
  }

  @Test(arguments: inputs("Corpus") + inputs("Regressions"))
  func replays(_ path: String) throws {
    let bytes = try #require(PlainFiles.contents(of: path), "\(path) is readable")
    #expect(ControlFuzzEntry.run(bytes) == [], "\(path)")
  }

  @Test func theSeedsSayWhatTheyAre() throws {
    let list = try #require(Self.inputs("Corpus").first { $0.hasSuffix("list.json") })
    let bytes = try #require(PlainFiles.contents(of: list))
    #expect(ControlRequest.decode(bytes) == .success(ControlRequest(.list)))
    let unknown = try #require(Self.inputs("Corpus").first { $0.hasSuffix("unknown.json") })
    #expect(
      ControlRequest.decode(try #require(PlainFiles.contents(of: unknown))) == .failure(.unknownVerb("rm")))
    let version = try #require(Self.inputs("Corpus").first { $0.hasSuffix("protocol-1.json") })
    #expect(ControlRequest.decode(try #require(PlainFiles.contents(of: version))) == .failure(.version(1)))
  }
}
