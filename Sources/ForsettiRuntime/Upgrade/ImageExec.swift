import CForsettiSys
import FoundationEssentials
import Glibc

/// Becomes another image in this same process: the host's pid, its children and the
/// descriptors it keeps stay; everything else of this image ends. Called on the host's thread,
/// the one whose children the workers are (their parent-death signal follows the thread that
/// forked them, which an `execve` on another thread would end).
package enum ImageExec {
  /// `executable` with `arguments` (argv[0] first), this environment with `setting` added (a
  /// variable of the same name replaced), and the descriptors of `keep` inherited. Returns only
  /// when the exec failed: its errno.
  package static func exec(
    _ executable: String, arguments: [String], setting: [String: String], keep: [Int32]
  ) -> Int32 {
    var environment = ProcessInfo.processInfo.environment
    for (name, value) in setting { environment[name] = value }
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    var envp = environ(environment)
    defer { for e in envp { free(e) } }
    let rc = keep.withUnsafeBufferPointer { k in
      forsetti_exec_image(executable, &argv, &envp, k.baseAddress, Int32(k.count))
    }
    return -rc
  }

  /// `environment` as `NAME=VALUE` C strings, sorted, nil-terminated, for `execve` and
  /// `posix_spawn`; the caller frees them.
  static func environ(_ environment: [String: String]) -> [UnsafeMutablePointer<CChar>?] {
    environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
  }

  /// The executable this process was started from, as the kernel names it now: ` (deleted)`
  /// once the file was replaced (the new file is at the same path, without the suffix).
  package static var running: String? {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard n > 0 else { return nil }
    return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// The path of the executable to take over with: the running one's, whether or not its file
  /// was replaced since.
  package static var path: String? {
    guard let running else { return nil }
    let suffix = " (deleted)"
    return running.hasSuffix(suffix) ? String(running.dropLast(suffix.count)) : running
  }
}
