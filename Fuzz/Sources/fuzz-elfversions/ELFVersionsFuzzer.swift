import ForsettiBinary
import FuzzSupport

let scratch = ScratchFile("fuzz-elfversions")

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzELFVersions(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let path = scratch.write(data, size, target: "fuzz-elfversions")
  FuzzDriver.require("fuzz-elfversions", ELFVersionsFuzzEntry.run(path: path))
  return 0
}

@main enum ELFVersionsFuzzer {
  static func main() {
    FuzzDriver.run(fuzzELFVersions)
  }
}
