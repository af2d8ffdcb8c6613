import Foundation

/// The result of running a real process to completion.
public struct ProcessResult: Sendable {
  public var status: Int32
  public var stdout: String
  public var stderr: String
}

/// Runs real processes for tests: compilers building fixtures, the `forsetti-host` binary.
public enum ProcessRunner {
  /// Runs `executable` with `arguments` in `directory`; waits for it to exit.
  public static func run(_ executable: String, _ arguments: [String], in directory: String? = nil) throws
    -> ProcessResult
  {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let out = Pipe()
    let err = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = FileHandle.nullDevice
    try p.run()
    // Read both pipes before waiting so a chatty child cannot fill a pipe and block.
    let (o, e) = readBoth(out.fileHandleForReading, err.fileHandleForReading)
    p.waitUntilExit()
    return ProcessResult(status: p.terminationStatus, stdout: o, stderr: e)
  }

  private static func readBoth(_ a: FileHandle, _ b: FileHandle) -> (String, String) {
    let box = ErrBox()
    let group = DispatchGroup()
    group.enter()
    DispatchQueue.global().async {
      box.set(b.readDataToEndOfFile())
      group.leave()
    }
    let first = a.readDataToEndOfFile()
    group.wait()
    return (String(decoding: first, as: UTF8.self), String(decoding: box.get(), as: UTF8.self))
  }
}

// Holds the stderr bytes read on another thread; the lock makes the hand-over safe.
private final class ErrBox: @unchecked Sendable {
  private let lock = NSLock()
  private var data = Data()
  func set(_ d: Data) { lock.withLock { data = d } }
  func get() -> Data { lock.withLock { data } }
}
