import ForsettiCore
import Glibc

/// The last crash reports of each module, kept under the state directory so a vendor's report
/// outlives the host: `STATE/crashes/<moduleID>/<time>-<n>.json`, the newest `kept` per module
/// (older ones removed as a new one is written). Read by `explain` and `crashes`.
package struct CrashStore: Sendable {
  package let directory: String
  /// Reports kept per module.
  package static let kept = 10
  /// A report file read at most (a file someone else put there is not read whole).
  static let readLimit = 1 << 20

  package init(stateDirectory: String) { directory = PathText.join(stateDirectory, "crashes") }

  /// Writes `report` and removes its module's oldest beyond `kept`; false when it could not.
  @discardableResult
  package func save(_ report: CrashReport) -> Bool {
    let dir = PathText.join(directory, report.moduleID)
    mkdir(directory, 0o700)
    mkdir(dir, 0o700)
    let taken = Set(PlainFiles.names(in: dir) ?? [])
    var n = 0
    while taken.contains(Self.name(report.time, n)) { n += 1 }
    let bytes = Array((JSONWriter.string(report.json, pretty: true) + "\n").utf8)
    guard PlainFiles.writeAtomically(bytes, to: PathText.join(dir, Self.name(report.time, n)), mode: 0o600)
    else {
      return false
    }
    for old in files(of: report.moduleID).dropLast(Self.kept) { unlink(PathText.join(dir, old)) }
    return true
  }

  /// `<time>-<n>.json`, the time zero-padded so names sort in time order.
  static func name(_ time: Int64, _ n: Int) -> String {
    let t = String(max(0, time))
    return String(repeating: "0", count: max(0, 12 - t.count)) + t + "-\(n).json"
  }

  /// The report files of `moduleID`, oldest first.
  func files(of moduleID: String) -> [String] {
    (PlainFiles.names(in: PathText.join(directory, moduleID)) ?? []).filter { $0.hasSuffix(".json") }.sorted {
      let a = $0.split(separator: "-"), b = $1.split(separator: "-")
      if a.first != b.first { return $0 < $1 }
      return (Int(a.last?.dropLast(5) ?? "") ?? 0) < (Int(b.last?.dropLast(5) ?? "") ?? 0)
    }
  }

  /// Every module with a report kept, sorted.
  package var modules: [String] {
    (PlainFiles.names(in: directory) ?? []).filter { !$0.hasPrefix(".") }.sorted()
  }

  /// The reports of `moduleID`, oldest first (a file that is not a report is passed by).
  package func reports(of moduleID: String) -> [CrashReport] {
    files(of: moduleID).compactMap { report(moduleID, $0) }
  }

  /// The newest report of `moduleID`: the newest file that is one, the others not read (`list`
  /// asks this of every module).
  package func latest(_ moduleID: String) -> CrashReport? {
    files(of: moduleID).reversed().lazy.compactMap { report(moduleID, $0) }.first
  }

  /// The report in file `name` of `moduleID`'s directory, when it is one of that module's.
  private func report(_ moduleID: String, _ name: String) -> CrashReport? {
    PlainFiles.contents(of: PathText.join(PathText.join(directory, moduleID), name), limit: Self.readLimit)
      .flatMap { try? JSONParser.parse($0) }
      .flatMap(CrashReport.init(json:))
      .flatMap { $0.moduleID == moduleID ? $0 : nil }
  }
}
