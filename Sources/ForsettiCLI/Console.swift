import Foundation

/// Where a command writes: standard output and standard error, or a capture in tests.
public struct Console: Sendable {
  public var out: @Sendable (String) -> Void
  public var err: @Sendable (String) -> Void

  public init(out: @escaping @Sendable (String) -> Void, err: @escaping @Sendable (String) -> Void) {
    self.out = out
    self.err = err
  }

  /// The process's own standard output and error.
  public static let standard = Console(
    out: { s in FileHandle.standardOutput.write(Data(s.utf8)) },
    err: { s in FileHandle.standardError.write(Data(s.utf8)) })
}
