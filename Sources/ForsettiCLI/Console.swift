import Foundation

/// Where a command writes: standard output and standard error, or a capture in tests.
public struct Console: Sendable {
  public var out: @Sendable (String) -> Void
  public var err: @Sendable (String) -> Void

  public init(out: @escaping @Sendable (String) -> Void, err: @escaping @Sendable (String) -> Void) {
    self.out = out
    self.err = err
  }

  /// The process's own standard output and error. A closed reader (`forsetti-host run | head`)
  /// loses the text but never stops the host: `write(_: Data)` would trap on EPIPE.
  public static let standard = Console(
    out: { s in _ = try? FileHandle.standardOutput.write(contentsOf: Data(s.utf8)) },
    err: { s in _ = try? FileHandle.standardError.write(contentsOf: Data(s.utf8)) })
}
