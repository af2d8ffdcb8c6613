import ForsettiCore
import Glibc

/// Reading and writing control lines against one deadline for the whole line, not per `read`:
/// a peer that trickles a byte at a time cannot stretch a request or an answer past it.
enum ControlSocketIO {
  /// What reading a line came to.
  enum ReadResult: Equatable {
    case line([UInt8])
    /// The peer closed (or reset) the connection before a whole line.
    case closed
    /// More than `ControlRequest.maxLine` bytes without a newline.
    case tooLong
    /// The deadline passed first.
    case timedOut
  }

  /// Milliseconds from now until `deadline`, for `poll`: 0 when it has passed, at most `cap`.
  static func milliseconds(until deadline: ContinuousClock.Instant, cap: Int32 = .max) -> Int32 {
    let left = deadline - ContinuousClock.now
    guard left > .zero else { return 0 }
    let (seconds, attoseconds) = left.components
    let ms = seconds.multipliedReportingOverflow(by: 1000)
    guard !ms.overflow else { return cap }
    let total = ms.partialValue.addingReportingOverflow(attoseconds / 1_000_000_000_000_000 + 1)
    guard !total.overflow, total.partialValue < Int64(cap) else { return cap }
    return Int32(total.partialValue)
  }

  /// The deadline `seconds` from now.
  static func deadline(in seconds: Double) -> ContinuousClock.Instant {
    ContinuousClock.now + .milliseconds(Int64((seconds * 1000).rounded()))
  }

  /// Waits until `fd` is ready for `events` or the deadline passes; false when it passed.
  static func wait(_ fd: Int32, _ events: Int16, until deadline: ContinuousClock.Instant) -> Bool {
    while true {
      var p = pollfd(fd: fd, events: events, revents: 0)
      let n = poll(&p, 1, milliseconds(until: deadline, cap: 1000))
      if n > 0 { return true }
      if n < 0 && errno != EINTR { return true }  // let the next call report the error
      if ContinuousClock.now >= deadline { return false }
    }
  }

  /// One line from `fd`, without its newline, by `deadline`.
  static func readLine(_ fd: Int32, until deadline: ContinuousClock.Instant) -> ReadResult {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      guard wait(fd, Int16(POLLIN), until: deadline) else { return .timedOut }
      let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
      if n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) { continue }
      guard n > 0 else { return .closed }
      if let nl = chunk[0..<n].firstIndex(of: 0x0A) {
        bytes += chunk[0..<nl]
        return bytes.count <= ControlRequest.maxLine ? .line(bytes) : .tooLong
      }
      bytes += chunk[0..<n]
      if bytes.count > ControlRequest.maxLine { return .tooLong }
    }
  }

  /// Sends all of `bytes` by `deadline`; false when the peer went away or was too slow to take it.
  @discardableResult
  static func send(_ bytes: [UInt8], to fd: Int32, until deadline: ContinuousClock.Instant) -> Bool {
    var sent = 0
    while sent < bytes.count {
      let n = bytes[sent...].withUnsafeBytes {
        Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
      }
      if n < 0 && errno == EINTR { continue }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
        guard wait(fd, Int16(POLLOUT), until: deadline) else { return false }
        continue
      }
      guard n > 0 else { return false }
      sent += n
    }
    return true
  }
}
