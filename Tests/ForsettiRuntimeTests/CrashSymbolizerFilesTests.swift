import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiRuntime

/// A worker's crash record is the module's word: the paths in it name the files the host's
/// DWARF reader opens. Only files the host knows are read (`CrashSymbolizer.Files`): a record
/// naming `/etc/shadow`, a file in the sandbox, or a link that leads out of the module's
/// library directory gets nothing read; the module's own file, a library it ships (reached
/// through its version copy's link, judged by where the link leads) and system libraries do.
@Suite struct CrashSymbolizerFilesTests {
  @Test func onlyFilesTheHostKnowsAreRead() throws {
    let dir = TemporaryDirectory("crash-files")
    let libs = dir.url("plugins/libs")
    try FileManager.default.createDirectory(atPath: libs, withIntermediateDirectories: true)
    let library = try dir.write("plugins/libs/libvendor.so", "not read here")
    // The version copy's mirror: a link to the library's directory, as VersionCopies makes it.
    try FileManager.default.createDirectory(atPath: dir.url("copy"), withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(atPath: dir.url("copy/libs"), withDestinationPath: libs)
    // A link a module could plant in its sandbox, into a file it must not make the host read.
    try FileManager.default.createDirectory(atPath: dir.url("sandbox"), withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(
      atPath: dir.url("sandbox/evil.so"), withDestinationPath: "/etc/shadow")
    let files = CrashSymbolizer.Files(
      module: dir.url("copy/module.so"), moduleDirectories: [libs],
      worker: "/usr/libexec/forsetti/forsetti-worker",
      libraryDirectories: ["/usr/lib", "/lib"])

    for forged in [
      "/etc/shadow", dir.url("sandbox/evil.so"), dir.url("sandbox/x.so"), "/proc/self/mem", "relative.so",
    ] {
      #expect(files.owner(forged) == nil, "\(forged) would be read")
    }
    // The controls: what the host knows is read, and whose it is.
    #expect(files.owner(dir.url("copy/module.so"))?.owner == .module)
    let shipped = try #require(files.owner(dir.url("copy/libs/libvendor.so")))
    #expect(shipped.owner == .module && shipped.file == library, "\(shipped)")
    #expect(files.owner("/usr/libexec/forsetti/forsetti-worker")?.owner == .host)
    let libc = try #require(
      ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"].first {
        FileManager.default.fileExists(atPath: $0)
      })
    #expect(files.owner(libc)?.owner == .system)
  }
}
