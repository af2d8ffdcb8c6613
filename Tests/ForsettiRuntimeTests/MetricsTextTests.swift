import ForsettiCore
import ForsettiRuntime
import Testing

/// The exposition writer: label escaping (any string in, one valid quoted value out), exact
/// seconds, and histograms whose buckets are cumulative and end in the count.
@Suite struct MetricsTextTests {
  @Test func escapesBackslashQuoteAndLineFeedOnly() {
    #expect(MetricsText.escape("a\\b\"c\nd") == "a\\\\b\\\"c\\nd")
    #expect(MetricsText.escape("com.example.ü\t") == "com.example.ü\t")
    #expect(MetricsText.escape("") == "")
  }

  /// Whatever goes in, the escaped value has no raw line feed and no unescaped quote, and
  /// unescaping gives the input back.
  @Test func escapingIsReversibleForArbitraryText() {
    var random = SystemRandomNumberGenerator()
    let alphabet: [Character] = ["a", "\\", "\"", "\n", "é", "}", "{", ",", "=", " ", "\u{0}"]
    for _ in 0..<2000 {
      let s = String(
        (0..<Int.random(in: 0...12, using: &random)).map { _ in alphabet.randomElement(using: &random) ?? "a"
        })
      let e = MetricsText.escape(s)
      #expect(!e.contains("\n"))
      var back = ""
      var it = e.makeIterator()
      var ok = true
      while let c = it.next() {
        if c == "\"" { ok = false }
        guard c == "\\" else {
          back.append(c)
          continue
        }
        switch it.next() {
        case "\\": back.append("\\")
        case "\"": back.append("\"")
        case "n": back.append("\n")
        default: ok = false
        }
      }
      #expect(ok && back == s, "\(s.debugDescription) → \(e.debugDescription)")
    }
  }

  @Test func histogramIsCumulativeInSeconds() {
    let h = LatencyHistogram()
    h.record(nanoseconds: 500)
    h.record(nanoseconds: 3_000)
    h.record(nanoseconds: 5_000_000_000)
    var t = MetricsText()
    t.family("x_seconds", .histogram, help: "test")
    t.histogram("x_seconds", [("module", "m")], h)
    #expect(t.text.contains("x_seconds_bucket{module=\"m\",le=\"0.000001\"} 1\n"))
    #expect(t.text.contains("x_seconds_bucket{module=\"m\",le=\"0.000004\"} 2\n"))
    #expect(t.text.contains("x_seconds_bucket{module=\"m\",le=\"1.048576\"} 2\n"))
    #expect(t.text.contains("x_seconds_bucket{module=\"m\",le=\"+Inf\"} 3\n"))
    #expect(t.text.contains("x_seconds_sum{module=\"m\"} 5.0000035\n"))
    #expect(t.text.contains("x_seconds_count{module=\"m\"} 3\n"))
    #expect(t.text.hasPrefix("# HELP x_seconds test\n# TYPE x_seconds histogram\n"))
  }

  @Test func moduleCountersAreOnePerModule() {
    let m = HostMetrics()
    #expect(m.module("a") === m.module("a"))
    m.module("b").countCrash(signal: "SIGSEGV")
    m.module("b").countCrash(signal: nil)
    let text = MetricsExposition.render(m, records: [])
    #expect(text.contains("forsetti_module_crashes_total{module=\"b\",signal=\"SIGSEGV\"} 1\n"))
    #expect(text.contains("forsetti_module_crashes_total{module=\"b\",signal=\"none\"} 1\n"))
    #expect(text.contains("forsetti_module_crashes_total{module=\"a\",signal=\"none\"} 0\n"))
  }

  /// The host's own series say the image `status` says: the version as the label of a gauge of
  /// 1, the start, the upgrades, and the last upgrade's time once there was one (absent before).
  @Test func theHostSeriesSayTheImage() {
    let fresh = MetricsExposition.render(
      HostMetrics(), records: [], image: StatusAnswer.Image(version: "1.2.3", startedAt: 1_700_000_000))
    #expect(
      fresh.contains("# TYPE forsetti_host_info gauge\nforsetti_host_info{version=\"1.2.3\"} 1\n"), "\(fresh)"
    )
    #expect(fresh.contains("# TYPE forsetti_host_started_timestamp_seconds gauge\n"))
    #expect(fresh.contains("\nforsetti_host_started_timestamp_seconds 1700000000\n"))
    #expect(fresh.contains("# TYPE forsetti_host_upgrades_total counter\nforsetti_host_upgrades_total 0\n"))
    #expect(!fresh.contains("forsetti_host_upgraded_timestamp_seconds"), "\(fresh)")

    let upgraded = MetricsExposition.render(
      HostMetrics(), records: [],
      image: StatusAnswer.Image(
        version: "1.3.0", startedAt: 1_700_000_000, upgrades: 2, upgradeToken: "t", upgradedAt: 1_700_000_100)
    )
    #expect(upgraded.contains("forsetti_host_info{version=\"1.3.0\"} 1\n"))
    #expect(upgraded.contains("\nforsetti_host_started_timestamp_seconds 1700000000\n"))
    #expect(upgraded.contains("\nforsetti_host_upgrades_total 2\n"))
    #expect(
      upgraded.contains(
        "# TYPE forsetti_host_upgraded_timestamp_seconds gauge\nforsetti_host_upgraded_timestamp_seconds 1700000100\n"
      ), "\(upgraded)")
    // A host that says no image (none given) has none of them.
    #expect(!MetricsExposition.render(HostMetrics(), records: []).contains("forsetti_host_info"))
  }
}
