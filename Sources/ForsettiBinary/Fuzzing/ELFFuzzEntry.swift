import ForsettiCore

/// What the ELF fuzzer does with one file, shared by the libFuzzer target (`Fuzz/`) and the
/// regression test that replays its corpus, so both run exactly the same code.
public enum ELFFuzzEntry {
  /// Symbols checked per file: enough to cover what mutations reach, few enough that a table of
  /// thousands does not turn the quadratic name lookup into the fuzzer's whole time.
  static let checkedSymbols = 64

  /// Indexes and inspects the file at `path` as `inspect`, `check` and `dev` do, and returns
  /// the properties that did not hold (none on a good run). A trap inside is a finding of its own.
  public static func run(path: String) -> [String] {
    var broken: [String] = []
    var index = BinaryIndex()
    index.add(path)
    guard case .success(let facts)? = index.files[path] else {
      if case .failure(let e)? = index.files[path] { _ = e.description } else { broken.append("not indexed") }
      if !index.exporters.isEmpty { broken.append("a file that failed inspection exports symbols") }
      return broken
    }
    let table = facts.symbolTable
    for i in table.indices.prefix(checkedSymbols) {
      let symbol = table.symbol(at: i)
      _ = symbol.entryPointProblem
      // Names are compared as bytes; a name that is not UTF-8 has no String that spells it.
      guard table.withName(at: i, { $0.allSatisfy { $0 < 0x80 } }) else { continue }
      if table.index(of: symbol.name) == nil { broken.append("symbol \(i) is not found by its name") }
    }
    // An exported C function of the one indexed file is located in it or reported ambiguous,
    // never missing; a name it lacks is never located.
    for name in facts.exportedFunctions.prefix(checkedSymbols) where index.exporters[name] != nil {
      if case .failure(let v) = index.locate(entryPoint: name), v.reason != .ambiguousEntryPoint {
        broken.append("\(name) is indexed but not located: \(v.reason)")
      }
    }
    if case .success = index.locate(entryPoint: "forsetti_fuzz_absent_name") {
      broken.append("a name no file exports was located")
    }
    if let embedded = facts.embeddedManifest { _ = ManifestDecoder.decode(bytes: embedded) }
    return broken
  }
}
