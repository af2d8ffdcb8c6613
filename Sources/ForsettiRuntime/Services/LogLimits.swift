/// How much a module may write to the host's logs, and how large the log files may grow.
///
/// Defaults: each module may write 100 lines a second to the log (its log calls and its
/// standard output and error together) and, separately, 100 telemetry events a second, with
/// bursts of 200; a line costs one token per started 4 KiB. A worker's standard output is read
/// no faster than 1,000 lines a second. `host.log` and `telemetry.jsonl`
/// each rotate at 8 MiB and keep 5 files (the current one and `.1` … `.4`), so the two logs
/// never hold more than 80 MiB however long the host runs.
public struct LogLimits: Sendable, Hashable {
  /// Sustained lines (and, separately, telemetry events) per second per module.
  public var linesPerSecond: Int = 100
  /// Lines a module may write at once before the sustained rate applies.
  public var burstLines: Int = 200
  /// A line costs one token per started `bytesPerToken` bytes, so long lines count for more.
  public var bytesPerToken: Int = 4096
  /// The host reads a worker's standard output no faster than this many times the line rate
  /// (and burst): past that the module's own writes to it block, so a flood of standard output
  /// costs the host little CPU, while the lines it keeps still come within a second.
  public var outputReadFactor: Int = 10
  /// A log file is rotated before a line would take it past this size.
  public var maxFileBytes: Int = 8 << 20
  /// Files kept per log, the one being written included (`host.log`, `host.log.1` …).
  public var keptFiles: Int = 5
  /// While a module keeps being limited, how often the line counting its dropped lines comes.
  public var summaryEvery: Double = 5
  /// A module that has not been limited for this long is no longer flooding: the count of what
  /// it lost is written then.
  public var quietAfter: Double = 1

  /// The defaults above.
  public static let standard = LogLimits()

  public init() {}

  /// Why a setting was refused: its name and the value given.
  public enum Invalid: Error, Sendable, Hashable, CustomStringConvertible {
    case outOfRange(setting: String, value: Int, allowed: ClosedRange<Int>)

    public var description: String {
      switch self {
      case .outOfRange(let s, let v, let r):
        "\(s) must be between \(r.lowerBound) and \(r.upperBound), not \(v)"
      }
    }
  }

  /// Every setting out of its range: the field's name, its value, what is allowed.
  package var outOfRange: [(setting: String, value: Int, allowed: ClosedRange<Int>, unit: String)] {
    let checks: [(String, Int, ClosedRange<Int>, String)] = [
      ("linesPerSecond", linesPerSecond, 1...1_000_000, "lines a second"),
      ("burstLines", burstLines, 1...10_000_000, "lines"),
      ("bytesPerToken", bytesPerToken, 64...(1 << 20), "bytes"),
      ("outputReadFactor", outputReadFactor, 1...1000, "times"),
      ("maxFileBytes", maxFileBytes, 4096...(1 << 40), "bytes (4 KiB to 1 TiB)"),
      ("keptFiles", keptFiles, 1...1000, "files"),
    ]
    return checks.filter { !$0.2.contains($0.1) }.map { ($0.0, $0.1, $0.2, $0.3) }
  }

  /// Checks every setting (`ForsettiHost.Configuration.validated()` says all that are wrong).
  public func validated() throws(Invalid) -> LogLimits {
    if let first = outOfRange.first {
      throw .outOfRange(setting: first.setting, value: first.value, allowed: first.allowed)
    }
    return self
  }

  /// Tokens a line of `bytes` bytes costs: one per started `bytesPerToken`.
  func cost(bytes: Int) -> Int {
    let unit = max(1, bytesPerToken)
    return 1 + (max(1, bytes) - 1) / unit
  }

  /// The rotation part of these limits.
  package var rotation: RotationPolicy { RotationPolicy(maxFileBytes: maxFileBytes, keptFiles: keptFiles) }
}
