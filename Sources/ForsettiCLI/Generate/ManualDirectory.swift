import FoundationEssentials

/// Writes manual pages into a directory (`--generate-manual DIR`), creating it if missing.
enum ManualDirectory {
  /// The paths written, in the order of `pages`.
  static func write(_ pages: [ManualPage], into directory: String) throws(CommandFailure) -> [String] {
    do {
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    } catch {
      throw .configuration(
        .directory(option: "generate-manual", path: directory, reason: SystemReason.of(error)))
    }
    var written: [String] = []
    for page in pages {
      let path = directory.hasSuffix("/") ? directory + page.fileName : directory + "/" + page.fileName
      do {
        try Data(page.text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
      } catch {
        throw .configuration(.file(option: "generate-manual", path: path, reason: SystemReason.of(error)))
      }
      written.append(path)
    }
    return written
  }
}
