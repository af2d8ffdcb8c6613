import Foundation

/// Medians over repeated rounds, with the spread, in nanoseconds per operation.
struct Sample {
  var name: String
  var perOp: [Double]

  var median: Double {
    let s = perOp.sorted()
    guard !s.isEmpty else { return .nan }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
  }
  var min: Double { perOp.min() ?? .nan }
  var max: Double { perOp.max() ?? .nan }
}

enum Clock {
  static func ns() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
  }

  /// Runs `rounds` rounds of `ops` operations each; returns ns per operation per round.
  static func rounds(_ rounds: Int, ops: Int, _ body: (Int) -> Void) -> [Double] {
    (0..<rounds).map { _ in
      let t0 = ns()
      body(ops)
      return Double(ns() - t0) / Double(ops)
    }
  }
}

/// Human units for nanoseconds.
func human(_ ns: Double) -> String {
  if ns.isNaN { return "-" }
  if ns >= 1e6 { return String(format: "%.2f ms", ns / 1e6) }
  if ns >= 1e3 { return String(format: "%.2f µs", ns / 1e3) }
  return String(format: "%.1f ns", ns)
}
