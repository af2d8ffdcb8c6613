import ForsettiBridge
import ForsettiCore
import Glibc
import Synchronization

/// What a worker writes to its standard output and error (one pipe): each line a log record of
/// its module, its last lines kept for a crash report. Read by the host's `WorkerLoop`, 64 KiB a
/// turn at most; read to its end even after the worker's socket closes (a crash's last words).
final class WorkerOutput: Sendable {
  private let moduleID: String
  private let backend: InProcessBackend
  private let loop: WorkerLoop
  /// The read end, until the worker closes its end (then -1: closed here).
  private let descriptor: Mutex<Int32>
  private let entry = Mutex<UInt64?>(nil)
  /// Output read but not yet a whole line.
  private let pending: Mutex<[UInt8]>
  private let lastLines: Mutex<[String]>

  static let keptLines = 10

  init(
    moduleID: String, backend: InProcessBackend, loop: WorkerLoop, pending: [UInt8] = [], lines: [String] = []
  ) {
    self.moduleID = moduleID
    self.backend = backend
    self.loop = loop
    descriptor = Mutex(-1)
    self.pending = Mutex(pending)
    lastLines = Mutex(lines)
  }

  /// Puts the pipe's read end in the loop; false (the descriptor closed) if the kernel refused.
  func watch(_ fd: Int32) -> Bool {
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    descriptor.withLock { $0 = fd }
    guard let token = loop.add(fd, LoopHandler { [self] t in ready(fd, t) }) else {
      descriptor.withLock { $0 = -1 }
      close(fd)
      return false
    }
    entry.withLock { $0 = token }
    return true
  }

  /// The module's most recent log and output lines, for crash reports.
  var recentLines: [String] { lastLines.withLock { $0 } }

  func remember(_ line: String) {
    lastLines.withLock {
      $0.append(line)
      if $0.count > Self.keptLines { $0.removeFirst($0.count - Self.keptLines) }
    }
  }

  /// The read end still open and the part of a line read so far, for a handover to a new image
  /// of the host (the loop is paused: nothing reads meanwhile).
  var handover: (fd: Int32?, pending: [UInt8]) {
    let fd = descriptor.withLock { $0 }
    return (fd >= 0 ? fd : nil, pending.withLock { $0 })
  }

  private func ready(_ fd: Int32, _ t: WorkerLoop.Thread) -> WorkerLoop.Next {
    let chunk = min(t.scratch.count, 4096)
    for _ in 0..<16 {
      let n = Glibc.read(fd, t.scratch.baseAddress, chunk)
      if n < 0 && errno == EINTR { continue }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .again }
      guard n > 0 else {
        if let token = entry.withLock({ $0 }) { loop.remove(token) }
        descriptor.withLock { $0 = -1 }
        Glibc.close(fd)
        return .done
      }
      let lines = pending.withLock { pending -> [String] in
        pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: t.scratch[0..<n]))
        var lines: [String] = []
        while let nl = pending.firstIndex(of: 0x0A) {
          lines.append(String(decoding: pending[..<nl], as: UTF8.self))
          pending.removeSubrange(...nl)
        }
        if pending.count > 16 * 1024 { pending.removeAll() }
        return lines
      }
      for line in lines {
        remember(line)
        backend.log(moduleID: moduleID, level: .info, message: line, metadata: ["stream": "output"])
      }
    }
    return .again
  }
}
