import ForsettiBinary
import FuzzSupport
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
    FuzzDriver.say("fuzz-elf: cannot write the input to /dev/shm: \(String(cString: strerror(errno)))\n")
    exit(2)
  }
  let broken = ELFFuzzEntry.run(path: "/proc/self/fd/\(scratch)")
  FuzzDriver.require("fuzz-elf", broken)
  return 0
}

@main enum ELFFuzzer {
  static func main() {
    FuzzDriver.run(fuzzELF)
  }
}
