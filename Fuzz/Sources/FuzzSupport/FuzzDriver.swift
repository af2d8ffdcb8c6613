import CFuzzDriver
import Glibc

/// What every fuzzer shares: how it reports, how a broken property ends it, and how it hands
/// control to libFuzzer.
public enum FuzzDriver {
  /// To stderr, where libFuzzer reports too (`stderr` itself is not concurrency-safe to name).
  public static func say(_ line: String) {
    var line = line
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
  }

  /// Ends the run as a finding (abort, so libFuzzer keeps the input) when any property broke.
  public static func require(_ target: String, _ broken: [String]) {
    guard broken.isEmpty else {
      say("\(target): property broken: \(broken.joined(separator: "; "))\n")
      abort()
    }
  }

  /// Runs libFuzzer on this process's arguments with `test` as the entry, and exits with its
  /// status. (SwiftPM renames a debug executable's `main`, so libFuzzer's own is never linked.)
  public static func run(_ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, test))
  }
}
