import ForsettiBridge
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzCrashRecord(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
  FuzzDriver.require("fuzz-crash", CrashRecordFuzzEntry.run(bytes))
  return 0
}

@main enum CrashFuzzer {
  static func main() {
    FuzzDriver.run(fuzzCrashRecord)
  }
}
