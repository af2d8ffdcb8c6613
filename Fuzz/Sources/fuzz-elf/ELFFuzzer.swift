import ForsettiBinary
import FuzzSupport

let scratch = ScratchFile("fuzz-elf")

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzELF(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  FuzzDriver.require("fuzz-elf", ELFFuzzEntry.run(path: scratch.write(data, size, target: "fuzz-elf")))
  return 0
}

@main enum ELFFuzzer {
  static func main() {
    FuzzDriver.run(fuzzELF)
  }
}
