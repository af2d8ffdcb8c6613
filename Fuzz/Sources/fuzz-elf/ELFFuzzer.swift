import CFuzzDriver
import ForsettiBinary
import Glibc

// The inspector reads a path, so each input goes to one file in memory: created in /dev/shm,
// unlinked at once (nothing is left behind, even after a crash) and named through /proc.
let scratch: Int32 = {
  let name = "/dev/shm/forsetti-fuzz-elf-\(getpid())"
  let fd = open(name, O_RDWR | O_CREAT | O_EXCL, 0o600)
  unlink(name)
  return fd
}()

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzELF(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  guard scratch >= 0, ftruncate(scratch, 0) == 0, size == 0 || pwrite(scratch, data, size, 0) == size else {
    say("fuzz-elf: cannot write the input to /dev/shm: \(String(cString: strerror(errno)))\n")
    exit(2)
  }
  let broken = ELFFuzzEntry.run(path: "/proc/self/fd/\(scratch)")
  guard broken.isEmpty else {
    say("fuzz-elf: property broken: \(broken.joined(separator: "; "))\n")
    abort()
  }
  return 0
}

/// To stderr, where libFuzzer reports too (`stderr` itself is not concurrency-safe to name).
func say(_ line: String) {
  var line = line
  line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

@main enum ELFFuzzer {
  static func main() {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzELF))
  }
}
