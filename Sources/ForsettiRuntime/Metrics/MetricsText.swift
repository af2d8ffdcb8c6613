/// Writes the Prometheus text exposition format (0.0.4, which Prometheus and `promtool check
/// metrics` read): per family one `# HELP` and `# TYPE`, then its samples. Label values are
/// escaped here and nowhere else.
package struct MetricsText: Sendable {
  /// The exposition's media type.
  package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

  package private(set) var text = ""

  package init() {}

  /// A label value as the format needs it: `\` `"` and a line feed escaped; every other
  /// character as it is (the format is UTF-8).
  package static func escape(_ value: String) -> String {
    var out = ""
    out.reserveCapacity(value.utf8.count)
    for c in value.unicodeScalars {
      switch c {
      case "\\": out += "\\\\"
      case "\"": out += "\\\""
      case "\n": out += "\\n"
      default: out.unicodeScalars.append(c)
      }
    }
    return out
  }

  /// A HELP text escaped (`\` and line feed; quotes stay).
  static func escapeHelp(_ value: String) -> String {
    var out = ""
    for c in value.unicodeScalars {
      switch c {
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      default: out.unicodeScalars.append(c)
      }
    }
    return out
  }

  /// Kinds of metric family.
  package enum Kind: String, Sendable { case counter, gauge, histogram }

  /// Starts a family.
  package mutating func family(_ name: String, _ kind: Kind, help: String) {
    text += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(kind.rawValue)\n"
  }

  /// One sample line.
  package mutating func sample(_ name: String, _ labels: [(String, String)], _ value: String) {
    text += name
    if !labels.isEmpty {
      text += "{"
      text += labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",")
      text += "}"
    }
    text += " \(value)\n"
  }

  package mutating func sample(_ name: String, _ labels: [(String, String)], _ value: UInt64) {
    sample(name, labels, String(value))
  }

  /// The samples of a histogram of nanoseconds, in seconds (`_bucket`, `_sum`, `_count`).
  package mutating func histogram(_ name: String, _ labels: [(String, String)], _ h: LatencyHistogram) {
    histogram(name, labels, snapshot: h.snapshot())
  }

  /// A histogram as `snapshot` saw it (so a counter written beside it can give the same count).
  package mutating func histogram(
    _ name: String, _ labels: [(String, String)], snapshot: (cumulative: [UInt64], sumNanoseconds: UInt64)
  ) {
    let (cumulative, sum) = snapshot
    for (i, bound) in LatencyHistogram.bounds.enumerated() {
      sample("\(name)_bucket", labels + [("le", Self.seconds(bound))], cumulative[i])
    }
    let total = cumulative.last ?? 0
    sample("\(name)_bucket", labels + [("le", "+Inf")], total)
    sample("\(name)_sum", labels, Self.seconds(sum))
    sample("\(name)_count", labels, total)
  }

  /// Nanoseconds as decimal seconds, exact (no floating point: `1024000` → `0.001024`).
  static func seconds(_ nanoseconds: UInt64) -> String {
    let whole = nanoseconds / 1_000_000_000
    var fraction = String(nanoseconds % 1_000_000_000)
    guard fraction != "0" else { return String(whole) }
    fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
    while fraction.hasSuffix("0") { fraction.removeLast() }
    return "\(whole).\(fraction)"
  }
}
