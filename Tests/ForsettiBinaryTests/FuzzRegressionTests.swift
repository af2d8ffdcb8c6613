import ForsettiBinary
import ForsettiCore
import ForsettiTestSupport
import Foundation
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

/// The symbol-version fuzzer's inputs: the ELF corpus it runs on (Fuzz/Corpus/elfversions is
/// that corpus) and its own findings, replayed through its entry.
@Suite(.onTestThreads) struct ELFVersionsFuzzRegressionTests {
  @Test(arguments: FuzzInputs.paths("Corpus", "elf") + FuzzInputs.paths("Regressions", "elfversions"))
  func replays(_ path: String) {
    #expect(ELFVersionsFuzzEntry.run(path: path) == [], "\(path)")
  }
}

/// The loader-cache fuzzer's kept inputs (seeds in Fuzz/Corpus/ldcache, findings in
/// Fuzz/Regressions/ldcache), replayed through its own entry: each file is read or refused
/// without a trap and breaks none of the entry's properties.
@Suite struct LoaderCacheFuzzRegressionTests {
  static func inputs(_ folder: String) -> [String] { FuzzInputs.paths(folder, "ldcache") }

  @Test func theSeedCorpusIsThere() {
    #expect(Self.inputs("Corpus").count >= 3, "Fuzz/Corpus/ldcache holds a cache of each format")
    // Every seed is a cache this reads: the fuzzer starts from valid files.
    for path in Self.inputs("Corpus") {
      let bytes = FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? []
      #expect(LoaderCache(bytes: bytes) != nil, "\(path)")
    }
  }

  @Test(arguments: inputs("Corpus") + inputs("Regressions"))
  func replays(_ path: String) throws {
    let bytes = try #require(FileManager.default.contents(atPath: path).map { [UInt8]($0) }, "\(path)")
    #expect(LoaderCacheFuzzEntry.run(bytes) == [], "\(path)")
  }
}
