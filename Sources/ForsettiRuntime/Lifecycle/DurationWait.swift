extension Duration {
  /// `seconds` as a wait: negative or NaN is none, and anything beyond a year is a year, so a
  /// timeout given on the command line (`--start-timeout 1e300`) cannot trap the conversion.
  package static func wait(_ seconds: Double) -> Duration {
    guard seconds > 0 else { return .zero }
    return .milliseconds(Int64(min(seconds, 365 * 86400) * 1000))
  }
}
