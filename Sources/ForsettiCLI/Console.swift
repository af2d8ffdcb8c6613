import Glibc

/// Where a command writes: standard output and standard error, or a capture in tests.
public struct Console: Sendable {
  public var out: @Sendable (String) -> Void
  public var err: @Sendable (String) -> Void

  public init(out: @escaping @Sendable (String) -> Void, err: @escaping @Sendable (String) -> Void) {
    self.out = out
    self.err = err
  }

  /// The process's own standard output and error. A closed reader (`forsetti-host run | head`)
  /// loses the text but never stops the host (`run` ignores SIGPIPE; a failed write is dropped).
  public static let standard = Console(out: { writeAll(1, $0) }, err: { writeAll(2, $0) })

  /// All of `text` to `fd`, resuming after partial writes and EINTR; any other error drops the rest.
  static func writeAll(_ fd: Int32, _ text: String) {
    var text = text
    text.withUTF8 { bytes in
      var done = 0
      while done < bytes.count {
        let n = write(fd, bytes.baseAddress.map { $0 + done }, bytes.count - done)
        if n > 0 {
          done += n
        } else if n < 0 && errno == EINTR {
          continue
        } else {
          return
        }
      }
    }
  }
}
