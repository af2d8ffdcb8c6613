import ForsettiBinary
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzLoaderCache(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let broken = LoaderCacheFuzzEntry.run(Array(UnsafeBufferPointer(start: data, count: size)))
  FuzzDriver.require("fuzz-ldcache", broken)
  return 0
}

@main enum LoaderCacheFuzzer {
  static func main() {
    FuzzDriver.run(fuzzLoaderCache)
  }
}
