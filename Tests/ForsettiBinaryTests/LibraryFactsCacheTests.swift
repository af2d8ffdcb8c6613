import ForsettiBinary
import ForsettiTestSupport
import Foundation
import Testing

/// The process-wide cache of library facts (`LibraryFactsCache`) answers from memory while a
/// file is unchanged and reads it again once it changed: a library replaced under a running
/// host (an `apt upgrade`) is judged as it is now.
@Suite struct LibraryFactsCacheTests {
  @Test func aChangedLibraryIsReadAgain() throws {
    let dir = TemporaryDirectory("facts-cache")
    let path = try CFixture.sharedObject("libone.so", source: "int first(void) { return 1; }\n", in: dir)
    let cache = LibraryFactsCache()
    let before = try cache.inspect(path).get()
    #expect(before.exportedFunctions.contains("first"))
    // Replaced by another file (a new inode, as a package manager does), then read.
    let other = try CFixture.sharedObject(
      "libtwo.so", source: "int second(void) { return 2; }\nint more(void) { return 3; }\n", in: dir)
    #expect(rename(other, path) == 0)
    let after = try cache.inspect(path).get()
    #expect(after.exportedFunctions.contains("second") && !after.exportedFunctions.contains("first"))
  }
}
