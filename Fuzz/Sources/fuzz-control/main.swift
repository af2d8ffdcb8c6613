import ForsettiCore
import FuzzSupport
import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzControl(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let broken = ControlFuzzEntry.run(Array(UnsafeBufferPointer(start: data, count: size)))
  FuzzDriver.require("fuzz-control", broken)
  return 0
}

@main enum ControlFuzzer {
  static func main() {
    FuzzDriver.run(fuzzControl)
  }
}
