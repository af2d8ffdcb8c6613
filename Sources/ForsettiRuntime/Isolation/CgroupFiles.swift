import Glibc

/// Every effect of cgroup management, so that a test can stand a temporary directory laid out
/// like a cgroup filesystem (with the kernel's rules played by the test) in for the real one.
package protocol CgroupFiles: Sendable {
  /// The whole text of a file (an interface file, `/proc/self/cgroup`, `/proc/swaps`).
  func read(_ path: String) throws(CgroupFileError) -> String
  /// Writes `text` in one `write(2)`, as cgroup interface files require.
  func write(_ path: String, _ text: String) throws(CgroupFileError)
  /// `mkdir(2)`: in cgroupfs, a new cgroup.
  func makeDirectory(_ path: String) throws(CgroupFileError)
  /// `rmdir(2)`: in cgroupfs, removes a cgroup without tasks or children.
  func removeDirectory(_ path: String) throws(CgroupFileError)
  /// Whether `path` exists (an interface file appears only with its controller).
  func exists(_ path: String) -> Bool
  /// The names of the directories directly inside `path`.
  func subdirectories(_ path: String) throws(CgroupFileError) -> [String]
  /// The uid owning `path`, for a message saying who may write there.
  func owner(_ path: String) -> UInt32?
  /// Whether a process with this pid exists (one owned by someone else counts).
  func isAlive(_ pid: Int32) -> Bool
  /// Sends SIGKILL to `pid`.
  func kill(_ pid: Int32)
  /// Waits a little while the kernel finishes something (a killed task leaving its cgroup).
  func pause(milliseconds: Int)
}

/// A failed file operation on a cgroup filesystem: what, where, and the errno.
package struct CgroupFileError: Error, Sendable, Equatable, CustomStringConvertible {
  package var operation: String
  package var path: String
  package var code: Int32

  /// `operation` on `path` failed with errno `code`.
  package init(_ operation: String, _ path: String, code: Int32) {
    self.operation = operation
    self.path = path
    self.code = code
  }

  package var description: String { "\(operation) \(path): \(String(cString: strerror(code)))" }
}

/// The kernel's cgroup filesystems, through plain system calls.
package struct KernelCgroupFiles: CgroupFiles {
  /// Interface files are small; this bounds a read of a file that is not one.
  private static let maximumRead = 1 << 20

  /// The kernel's files, as this process sees them.
  package init() {}

  package func read(_ path: String) throws(CgroupFileError) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw CgroupFileError("open", path, code: errno) }
    defer { close(fd) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while out.count < Self.maximumRead {
      let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if n < 0 {
        if errno == EINTR { continue }
        throw CgroupFileError("read", path, code: errno)
      }
      if n == 0 { break }
      out.append(contentsOf: buffer[0..<n])
    }
    return String(decoding: out, as: UTF8.self)
  }

  package func write(_ path: String, _ text: String) throws(CgroupFileError) {
    let fd = open(path, O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { throw CgroupFileError("open", path, code: errno) }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    while true {
      let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      guard n >= 0 else { throw CgroupFileError("write", path, code: errno) }
      // The kernel parses each write as a whole; a short one would be a different value.
      guard n == bytes.count else { throw CgroupFileError("write", path, code: EIO) }
      return
    }
  }

  package func makeDirectory(_ path: String) throws(CgroupFileError) {
    guard mkdir(path, 0o755) == 0 else { throw CgroupFileError("mkdir", path, code: errno) }
  }

  package func removeDirectory(_ path: String) throws(CgroupFileError) {
    guard rmdir(path) == 0 else { throw CgroupFileError("rmdir", path, code: errno) }
  }

  package func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

  package func subdirectories(_ path: String) throws(CgroupFileError) -> [String] {
    guard let dir = opendir(path) else { throw CgroupFileError("opendir", path, code: errno) }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
      let name = withUnsafePointer(to: &entry.pointee.d_name) {
        String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
      }
      guard name != ".", name != "..", entry.pointee.d_type == UInt8(DT_DIR) else { continue }
      names.append(name)
    }
    return names.sorted()
  }

  package func owner(_ path: String) -> UInt32? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    return st.st_uid
  }

  package func isAlive(_ pid: Int32) -> Bool {
    guard pid > 0 else { return false }
    return Glibc.kill(pid, 0) == 0 || errno == EPERM
  }

  package func kill(_ pid: Int32) {
    // Never 0 or negative (a process group, or everything), never the host itself.
    guard pid > 0, pid != getpid() else { return }
    _ = Glibc.kill(pid, SIGKILL)
  }

  package func pause(milliseconds: Int) {
    var request = timespec(tv_sec: 0, tv_nsec: max(0, min(milliseconds, 999)) * 1_000_000)
    var left = timespec()
    while nanosleep(&request, &left) != 0 && errno == EINTR { request = left }
  }
}
