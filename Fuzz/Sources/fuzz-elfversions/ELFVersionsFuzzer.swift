import ForsettiBinary
import FuzzSupport
import Glibc

// As fuzz-elf: each input goes to one file in memory, unlinked at once, named through /proc.
let scratch: Int32 = {
  let name = "/dev/shm/forsetti-fuzz-elfversions-\(getpid())"
  let fd = open(name, O_RDWR | O_CREAT | O_EXCL, 0o600)
  unlink(name)
  return fd
}()

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzELFVersions(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  guard scratch >= 0, ftruncate(scratch, 0) == 0, size == 0 || pwrite(scratch, data, size, 0) == size else {
    FuzzDriver.say(
      "fuzz-elfversions: cannot write the input to /dev/shm: \(String(cString: strerror(errno)))\n")
    exit(2)
  }
  FuzzDriver.require("fuzz-elfversions", ELFVersionsFuzzEntry.run(path: "/proc/self/fd/\(scratch)"))
  return 0
}

@main enum ELFVersionsFuzzer {
  static func main() {
    FuzzDriver.run(fuzzELFVersions)
  }
}
