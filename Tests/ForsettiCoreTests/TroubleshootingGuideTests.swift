import ForsettiCore
import Foundation
import Testing

/// docs/troubleshooting.md has an entry for every reason code, and no entry for a code that
/// does not exist, so the guide cannot drift from the code.
@Suite struct TroubleshootingGuideTests {
  @Test func everyReasonCodeHasAnEntry() throws {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    let text = try String(contentsOf: url.appendingPathComponent("docs/troubleshooting.md"), encoding: .utf8)
    let headings = Set(
      text.split(separator: "\n").filter { $0.hasPrefix("### `") }.map { String($0.dropFirst(5).dropLast()) })
    let codes = Set(ReasonCode.allCases.map(\.rawValue))
    #expect(codes.subtracting(headings).isEmpty, "missing: \(codes.subtracting(headings).sorted())")
    #expect(headings.subtracting(codes).isEmpty, "unknown: \(headings.subtracting(codes).sorted())")
  }
}
