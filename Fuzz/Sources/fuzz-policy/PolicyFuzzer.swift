import ForsettiCore
import FuzzSupport
import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzPolicy(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let broken = PolicyFuzzEntry.run(Array(UnsafeBufferPointer(start: data, count: size)))
  FuzzDriver.require("fuzz-policy", broken)
  return 0
}

@main enum PolicyFuzzer {
  static func main() {
    FuzzDriver.run(fuzzPolicy)
  }
}
