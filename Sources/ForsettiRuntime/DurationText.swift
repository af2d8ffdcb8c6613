/// How the host writes a short duration in its lines: "840 µs", "12 ms".
enum DurationText {
  static func short(_ d: Duration) -> String {
    let (s, atto) = d.components
    let us = Int(s) * 1_000_000 + Int(atto / 1_000_000_000_000)
    return us >= 10_000 ? "\(us / 1000) ms" : "\(us) µs"
  }
}
