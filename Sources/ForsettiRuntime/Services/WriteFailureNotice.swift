import Glibc

/// Says on standard error, once per episode, that a log could not be written, and once more
/// when writing works again, with the number of lines lost meanwhile. A full disk must cost one
/// line on stderr, not one per lost log line; the host itself goes on either way.
/// Not thread-safe on its own: its owner holds it under the same lock as the file it reports on.
struct WriteFailureNotice: Sendable {
  let what: String
  let fd: Int32
  private(set) var failing = false
  private(set) var lost = 0

  init(what: String, fd: Int32 = 2) {
    self.what = what
    self.fd = fd
  }

  /// A write or open failed with `errno` during `step`: said only if it is the first since the
  /// last success. The line lost with it is counted by ``lostLine()``.
  mutating func failed(_ step: String, errno e: Int32) {
    guard !failing else { return }
    failing = true
    say(
      "cannot \(step) \(what): \(String(cString: strerror(e))); its lines are lost until it can be written again"
    )
  }

  /// A line was lost (while failing).
  mutating func lostLine() { lost &+= 1 }

  /// A write succeeded: ends an episode, saying so.
  mutating func succeeded() {
    guard failing else { return }
    say("writing \(what) again; \(lost) line\(lost == 1 ? " was" : "s were") lost")
    failing = false
    lost = 0
  }

  /// Something worth saying once that is not a lost line (a rotation that could not rename).
  func say(_ message: String) {
    _ = FileDescriptor.writeAll(fd, Array("forsetti-host: \(message)\n".utf8))
  }
}
