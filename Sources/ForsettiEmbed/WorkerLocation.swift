import Glibc

/// Where the library finds `forsetti-worker` when the application names none: from the
/// library's own path, as `scripts/install` lays an installation out.
enum WorkerLocation {
  /// `PREFIX/libexec/forsetti/forsetti-worker` for `PREFIX/lib/libforsetti-embed.so`, else
  /// `forsetti-worker` beside the library (a build directory: SwiftPM puts both in one).
  static func besideLibrary() throws(EmbedFailure) -> String {
    guard let library = libraryPath() else {
      throw .host("cannot tell where libforsetti-embed is (/proc/self/maps); set the worker with set_worker")
    }
    let directory = String(library[..<(library.lastIndex(of: "/") ?? library.startIndex)])
    let parent = String(directory[..<(directory.lastIndex(of: "/") ?? directory.startIndex)])
    let candidates = [parent + "/libexec/forsetti/forsetti-worker", directory + "/forsetti-worker"]
    guard let found = candidates.first(where: { access($0, X_OK) == 0 }) else {
      throw .host(
        "no forsetti-worker at \(candidates.joined(separator: " or ")); set one with set_worker, or run in process"
      )
    }
    return found
  }

  /// The file this code was mapped from: the mapping of /proc/self/maps that holds this
  /// library's own address. (glibc's dladdr would say the same, but Swift's Glibc module does
  /// not offer it: it needs _GNU_SOURCE.)
  static func libraryPath() -> String? {
    let address = UInt(bitPattern: #dsohandle)
    guard let file = fopen("/proc/self/maps", "r") else { return nil }
    defer { fclose(file) }
    var line: UnsafeMutablePointer<CChar>?
    var capacity = 0
    defer { free(line) }
    while getline(&line, &capacity, file) > 0, let line {
      let text = String(cString: line)
      // "start-end perms offset dev inode path"
      let fields = text.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
      guard fields.count == 6, let dash = fields[0].firstIndex(of: "-"),
        let start = UInt(fields[0][..<dash], radix: 16),
        let end = UInt(fields[0][fields[0].index(after: dash)...], radix: 16),
        start <= address, address < end
      else { continue }
      let path = fields[5].trimmingPrefix(while: { $0 == " " })
      return path.hasPrefix("/") ? String(path.dropLast(path.hasSuffix("\n") ? 1 : 0)) : nil
    }
    return nil
  }
}
