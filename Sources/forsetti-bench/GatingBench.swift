import ForsettiBinary
import ForsettiCore
import Foundation
import Glibc

/// Discovery + gating of many modules, beside the C floor of the same work (Floors).
enum GatingBench {
  /// Writes `count` manifests and `.so` files into `dir`: one compiled template whose entry
  /// symbol name is rewritten in place per copy (same length), so generating 1,000 takes
  /// milliseconds. Such copies are valid for inspection; they are never loaded.
  static func generate(_ count: Int, in dir: String, include: String) throws {
    let template = Fixtures.module(
      id: "com.bench.g000000", entry: "entry_000000", start: "return FORSETTI_OK;")
    try FileManager.default.createDirectory(atPath: dir + "/plugins", withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: dir + "/manifests", withIntermediateDirectories: true)
    try Fixtures.build(template, to: dir + "/template.so", include: include)
    guard let data = FileManager.default.contents(atPath: dir + "/template.so") else { return }
    let bytes = [UInt8](data)
    let needle = Array("entry_000000".utf8)
    var hits: [Int] = []
    var i = 0
    while i + needle.count <= bytes.count {
      if bytes[i] == needle[0], Array(bytes[i..<i + needle.count]) == needle { hits.append(i) }
      i += 1
    }
    for n in 0..<count {
      let name = String(format: "entry_%06d", n)
      var copy = bytes
      for h in hits { copy.replaceSubrange(h..<h + needle.count, with: Array(name.utf8)) }
      _ = FileManager.default.createFile(atPath: dir + "/plugins/\(name).so", contents: Data(copy))
      let manifest = """
        {"schemaVersion":"1.0","moduleID":"com.bench.g\(String(format: "%06d", n))","displayName":"g",
         "moduleVersion":{"major":1,"minor":0,"patch":0},"moduleType":"service","supportedPlatforms":["linux"],
         "minForsettiVersion":{"major":0,"minor":1,"patch":0},"capabilitiesRequested":["storage"],"entryPoint":"\(name)"}
        """
      let manifestPath = dir + "/manifests/\(name).json"
      _ = FileManager.default.createFile(atPath: manifestPath, contents: Data(manifest.utf8))
    }
  }

  /// ns for discovery, ELF inspection and gating of everything in `dir`.
  static func gate(_ dir: String) -> Double {
    let t0 = Clock.ns()
    guard
      let report = try? ManifestDiscovery.discover(from: DirectoryManifestSource(root: dir + "/manifests"))
    else {
      return .nan
    }
    let t1 = Clock.ns()
    let index = BinaryIndex.build(directories: [dir + "/plugins"])
    let t2 = Clock.ns()
    let ctx = GateContext(approvals: .init(approveAll: true), providers: .init(discovered: report.manifests))
    let j = GateStack.judge(report, context: ctx, inspect: index.inspectionStep(for:), laterSteps: nil)
    let t = Double(Clock.ns() - t0)
    if ProcessInfo.processInfo.environment["FORSETTI_BENCH_DETAIL"] != nil {
      FileHandle.standardError.write(
        Data("discover \(t1 - t0) index \(t2 - t1) judge \(Clock.ns() - t2)\n".utf8))
    }
    return j.allSatisfy(\.passed) ? t : .nan
  }

}
