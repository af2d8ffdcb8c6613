import ForsettiBridge
import FuzzSupport
import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzWire(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let broken = WireFuzzEntry.run(Array(UnsafeBufferPointer(start: data, count: size)))
  FuzzDriver.require("fuzz-wire", broken)
  return 0
}

@main enum WireFuzzer {
  static func main() {
    // `fuzz-wire --write-seeds DIR`: the seed corpus, as real frames (see WireFuzzEntry.seeds).
    if CommandLine.arguments.count == 3, CommandLine.arguments[1] == "--write-seeds" {
      for (name, bytes) in WireFuzzEntry.seeds {
        let fd = open(CommandLine.arguments[2] + "/" + name, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0, write(fd, bytes, bytes.count) == bytes.count else { exit(1) }
        close(fd)
      }
      exit(0)
    }
    FuzzDriver.run(fuzzWire)
  }
}
