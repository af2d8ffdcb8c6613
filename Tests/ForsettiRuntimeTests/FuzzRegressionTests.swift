import ForsettiBridge
import ForsettiCore
import ForsettiTestSupport
import Testing

/// The crash-record fuzzer's kept inputs (seeds in Fuzz/Corpus/crash: records with lying counts
/// and lengths among them), replayed through its entry: each read without a trap, every count,
/// length and path bounded.
@Suite struct CrashRecordFuzzRegressionTests {
  @Test func theSeedCorpusIsThere() {
    #expect(FuzzInputs.paths("Corpus", "crash").count >= 3)
  }

  @Test(arguments: FuzzInputs.paths("Corpus", "crash") + FuzzInputs.paths("Regressions", "crash"))
  func replays(_ path: String) {
    #expect(CrashRecordFuzzEntry.run(PlainFiles.contents(of: path) ?? []) == [], "\(path)")
  }
}

/// The frame fuzzer's kept inputs (seeds in Fuzz/Corpus/wire, crashes it found in
/// Fuzz/Regressions/wire), replayed through the fuzzer's own entry in a normal build: every file
/// must be read as a frame and its payloads without a trap and break none of the entry's properties.
@Suite(.onTestThreads) struct WireFuzzRegressionTests {
  static func inputs(_ folder: String) -> [String] { FuzzInputs.paths(folder, "wire") }

  @Test func theSeedsAreTheFramesTheEncoderWritesToday() {
    // A change of the wire format must come with new seeds (`fuzz-wire --write-seeds`), or the
    // fuzzer would start from frames the readers refuse at once.
    for (name, bytes) in WireFuzzEntry.seeds {
      #expect(
        PlainFiles.contents(of: FuzzInputs.directory("Corpus", "wire") + "/\(name)") == bytes, "\(name)")
    }
  }

  @Test(arguments: inputs("Corpus") + inputs("Regressions"))
  func replays(_ path: String) throws {
    let bytes = try #require(PlainFiles.contents(of: path), "\(path) is readable")
    #expect(WireFuzzEntry.run(bytes) == [], "\(path)")
  }
}
