import Glibc

/// One file in memory that each input is written to, for entries that read a path: created in
/// /dev/shm, unlinked at once (nothing is left behind, even after a crash) and named through
/// /proc.
public struct ScratchFile: Sendable {
  public let descriptor: Int32

  public init(_ target: String) {
    let name = "/dev/shm/forsetti-\(target)-\(getpid())"
    descriptor = open(name, O_RDWR | O_CREAT | O_EXCL, 0o600)
    unlink(name)
  }

  /// Writes the input over the file and returns its path; ends the run when it cannot.
  public func write(_ data: UnsafePointer<UInt8>?, _ size: Int, target: String) -> String {
    guard descriptor >= 0, ftruncate(descriptor, 0) == 0,
      size == 0 || pwrite(descriptor, data, size, 0) == size
    else {
      FuzzDriver.say("\(target): cannot write the input to /dev/shm: \(String(cString: strerror(errno)))\n")
      exit(2)
    }
    return "/proc/self/fd/\(descriptor)"
  }
}
