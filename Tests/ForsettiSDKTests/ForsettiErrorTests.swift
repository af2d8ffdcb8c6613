import CForsetti
import Testing

@testable import ForsettiSDK

/// The SDK's mapping between forsetti.h statuses and `ForsettiError`: every code has its own
/// case and comes back unchanged, and a code the SDK does not know is kept, not lost.
@Suite struct ForsettiErrorTests {
  /// Every FORSETTI_ERR_* of forsetti/status.h, with the case it must map to.
  static let codes: [(Int32, ForsettiError)] = [
    (FORSETTI_ERR_INVALID_ARGUMENT, .invalidArgument), (FORSETTI_ERR_DENIED, .denied),
    (FORSETTI_ERR_REVOKED, .revoked), (FORSETTI_ERR_NOT_FOUND, .notFound), (FORSETTI_ERR_IO, .io),
    (FORSETTI_ERR_TOO_LARGE, .tooLarge), (FORSETTI_ERR_BUFFER_TOO_SMALL, .bufferTooSmall),
    (FORSETTI_ERR_COMMUNICATION_DENIED, .communicationDenied), (FORSETTI_ERR_START_FAILED, .startFailed),
    (FORSETTI_ERR_UNAVAILABLE, .unavailable), (FORSETTI_ERR_TIMEOUT, .timeout),
    (FORSETTI_ERR_INVALID_DATA, .invalidData), (FORSETTI_ERR_CALL_CYCLE, .callCycle),
    (FORSETTI_ERR_QUOTA, .quota), (FORSETTI_ERR_BUSY, .busy),
  ]

  @Test func everyStatusMapsToItsOwnCaseAndBack() {
    for (code, error) in Self.codes {
      #expect(ForsettiError(code) == error, "status \(code)")
      #expect(error.status == code, "\(error)")
      #expect(error.description == "\(error.name) (\(code))")
    }
    #expect(Set(Self.codes.map(\.1)).count == Self.codes.count, "two codes share a case")
    #expect(Set(Self.codes.map(\.1.name)).count == Self.codes.count, "two cases share a name")
  }

  /// The status header is the list: a code added there without a case here would be `other`.
  @Test func theHeaderHasNoCodeWithoutACase() {
    let known = Set(Self.codes.map(\.0))
    #expect(known == Set((-15)...(-1)), "status.h and the SDK disagree: \(known.sorted())")
  }

  @Test func anUnknownStatusIsKeptAsItIs() {
    for code: Int32 in [-16, -99, 7, Int32.min] {
      #expect(ForsettiError(code) == .other(code))
      #expect(ForsettiError(code).status == code)
      #expect(ForsettiError(code).description == "forsetti status \(code)")
    }
  }

  @Test func checkThrowsOnlyForANonZeroStatus() {
    #expect(throws: Never.self) { try ForsettiError.check(FORSETTI_OK) }
    #expect(throws: ForsettiError.quota) { try ForsettiError.check(FORSETTI_ERR_QUOTA) }
  }
}
