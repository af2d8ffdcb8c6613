import ForsettiBinary
import ForsettiCore
import ForsettiTestSupport
import Testing

/// The ELF fuzzer's kept inputs (seeds in Fuzz/Corpus/elf, crashes it found in
/// Fuzz/Regressions/elf), replayed through the fuzzer's own entry in a normal build: every file
/// must be inspected and indexed without a trap and break none of the entry's properties.
@Suite(.onTestThreads) struct ELFFuzzRegressionTests {
  static func inputs(_ folder: String) -> [String] { FuzzInputs.paths(folder, "elf") }

  @Test func theSeedCorpusIsThere() {
    #expect(Self.inputs("Corpus").count >= 4, "Fuzz/Corpus/elf holds the seed ELF files")
  }

  @Test(arguments: inputs("Corpus") + inputs("Regressions"))
  func replays(_ path: String) {
    #expect(ELFFuzzEntry.run(path: path) == [], "\(path)")
  }
}
