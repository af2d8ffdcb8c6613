/// What the loader-cache fuzzer does with one input, shared by the libFuzzer target (`Fuzz/`)
/// and the regression test that replays its corpus, so both run exactly the same code.
public enum LoaderCacheFuzzEntry {
  /// Entries checked per input: enough for what mutations reach, few enough that a table of
  /// thousands does not make the quadratic lookups the fuzzer's whole time.
  static let checkedEntries = 64

  /// Reads `bytes` as `/etc/ld.so.cache` and returns the properties that did not hold (none on
  /// a good run). A trap inside is a finding of its own.
  public static func run(_ bytes: [UInt8]) -> [String] {
    guard let cache = LoaderCache(bytes: bytes) else { return [] }
    var broken: [String] = []
    // An entry is at least 12 bytes of the file: more entries than that were made up.
    if cache.entries.count > bytes.count / LoaderCache.oldEntry {
      broken.append("\(cache.entries.count) entries from \(bytes.count) bytes")
    }
    for e in cache.entries.prefix(checkedEntries) {
      // A lookup answers with the path of an entry of that name and flags, never another's.
      guard let p = cache.path(for: e.name, flags: e.flags) else {
        broken.append("\(e.name) is not found by its name")
        continue
      }
      if !cache.entries.contains(where: { $0.name == e.name && $0.flags == e.flags && $0.path == p }) {
        broken.append("\(e.name) is found at \(p), which no entry of its name gives")
      }
    }
    return broken
  }
}
