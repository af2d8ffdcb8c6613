/// What the symbol-version fuzzer does with one file: reads its `.gnu.version_r` and
/// `.gnu.version_d` (`SymbolVersions`) and judges it as a module whose every needed library is
/// the file itself (`BinaryCompatibility`) and against a baseline (`BinaryBaseline`). Shared by
/// the libFuzzer target (`Fuzz/`, on the ELF corpus) and the regression test that replays it.
public enum ELFVersionsFuzzEntry {
  /// Needs looked at per file: what mutations reach, without a table of thousands taking the
  /// fuzzer's whole time.
  static let checkedNeeds = 64

  /// The properties that did not hold (none on a good run). A trap inside is a finding of its own.
  public static func run(path: String) -> [String] {
    guard case .success(let facts) = ELFInspector.inspect(path) else { return [] }
    var broken: [String] = []
    let table = facts.symbolTable
    // The file as every library it needs: what it defines decides, as it would for the loader.
    var resolution = LibraryResolver.Resolution()
    for need in table.versionNeeds.prefix(checkedNeeds) {
      resolution.found.append(
        .init(name: need.file, neededBy: path, path: path, realPath: path, source: .defaultDirectory))
    }
    resolution.objects[path] = facts
    let problems = BinaryCompatibility.problems(facts, path: path, resolution)
    if problems.count > BinaryCompatibility.reported { broken.append("\(problems.count) problems reported") }
    if table.definedVersions == nil && !problems.isEmpty {
      broken.append("a file defining no versions was found lacking one: \(problems)")
    }
    // A version said missing is one the file needs (not weak) and does not define.
    let needed = Set(table.versionNeeds.flatMap { n in n.versions.filter { !$0.weak }.map(\.name) })
    for p in problems {
      guard case .missingVersion(_, _, let version, _, _, _) = p else { continue }
      if !needed.contains(version) || table.definedVersions?.contains(version) == true {
        broken.append("\(version) said missing: \(p)")
      }
    }
    if let baseline = BinaryBaseline.glibc("2.17") {
      for f in baseline.findings(facts, path: path, resolution) { _ = f.description }
    }
    return broken
  }
}
