import CFuzzDriver
import ForsettiCore
import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzManifest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let broken = ManifestFuzzEntry.run(Array(UnsafeBufferPointer(start: data, count: size)))
  guard broken.isEmpty else {
    say("fuzz-manifest: property broken: \(broken.joined(separator: "; "))\n")
    abort()
  }
  return 0
}

/// To stderr, where libFuzzer reports too (`stderr` itself is not concurrency-safe to name).
func say(_ line: String) {
  var line = line
  line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

@main enum ManifestFuzzer {
  static func main() {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzManifest))
  }
}
