import Foundation

/// The inputs the fuzzers keep (`Fuzz/Corpus/<target>`, `Fuzz/Regressions/<target>`), which
/// the regression suites replay through the fuzzers' own entries in a normal build.
public enum FuzzInputs {
  /// `Fuzz/<folder>/<target>` in this checkout.
  public static func directory(_ folder: String, _ target: String) -> String {
    (HostBinary.packageRoot as NSString).appendingPathComponent("Fuzz/\(folder)/\(target)")
  }

  /// Every file of `Fuzz/<folder>/<target>`, sorted, hidden files left out.
  public static func paths(_ folder: String, _ target: String) -> [String] {
    let dir = directory(folder, target)
    let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
    return names.filter { !$0.hasPrefix(".") }.sorted().map { dir + "/" + $0 }
  }
}
