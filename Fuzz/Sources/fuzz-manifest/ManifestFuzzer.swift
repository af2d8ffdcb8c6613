import ForsettiCore
import FuzzSupport
import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzManifest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let broken = ManifestFuzzEntry.run(Array(UnsafeBufferPointer(start: data, count: size)))
  FuzzDriver.require("fuzz-manifest", broken)
  return 0
}

@main enum ManifestFuzzer {
  static func main() {
    FuzzDriver.run(fuzzManifest)
  }
}
