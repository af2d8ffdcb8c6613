/// What the manifest fuzzer does with one input, shared by the libFuzzer target (`Fuzz/`) and
/// the regression test that replays its corpus, so both run exactly the same code.
public enum ManifestFuzzEntry {
  /// A fixed instant, so a run is the same whenever it is replayed.
  static let now: Double = 1_800_000_000

  /// Reads `bytes` as the host reads a manifest file and returns the properties that did not
  /// hold (none on a good run). A trap inside is a finding of its own.
  public static func run(_ bytes: [UInt8]) -> [String] {
    var broken: [String] = []
    let parsed = try? JSONParser.parse(bytes)
    if let parsed {
      // What the writer writes, the parser reads back as the same value.
      for pretty in [false, true] {
        let text = JSONWriter.string(parsed, pretty: pretty)
        if (try? JSONParser.parse(text)) != parsed { broken.append("JSON round trip (pretty: \(pretty))") }
      }
      _ = ManifestDecoder.looksLikeManifest(parsed)
    }
    let full = parsed.map(ManifestDecoder.decode)
    // The fast path may decline anything, but what it accepts the full decoder must accept as
    // the same manifest.
    if let fast = ManifestFastPath.decode(bytes) {
      guard case .success(let m)? = full, m == fast else {
        return broken + ["the fast path accepted a manifest the full decoder reads otherwise"]
      }
    }
    // Discovery's verdict (cross-field checks included) is the same whichever decoder answered.
    for mode in [DiscoveryMode.fallback, .strict] {
      let viaFast = ManifestDiscovery.judge(bytes: bytes, file: "fuzz.json", mode: mode)
      let viaFull = ManifestDiscovery.judge(bytes: bytes, file: "fuzz.json", mode: mode, fastPath: false)
      if viaFast != viaFull { broken.append("discovery's verdict depends on the fast path (\(mode))") }
      _ = viaFast.outcome.detail
    }
    switch ManifestDecoder.decode(bytes: bytes) {
    case .success(let m):
      guard case .success(let expected)? = full, expected == m else {
        return broken + ["decode(bytes:) accepted what parse + decode does not"]
      }
      var trace = GateTrace()
      GateEvaluator.evaluatePreLoad(m, GateContext(now: now), into: &trace)
      _ = CompatibilityChecker().passDetail(m)
      _ = trace.entries.map(\.detail)
    case .failure(let e):
      if case .success? = full { broken.append("decode(bytes:) refused what parse + decode accepts") }
      _ = e.description
      _ = e.reason
    }
    return broken
  }
}
