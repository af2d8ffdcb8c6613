import ForsettiCore
import ForsettiRuntime
import Testing

@testable import ForsettiCLI

/// The command line's one table from a failure's field to its own option or argument: every
/// field the host can name is one an operator typed, and a host's failure reads on the terminal
/// as it did when the host named the flags itself.
@Suite struct FailureFieldsTests {
  /// The served verbs' commands, whose options and arguments the fields are.
  static let served = ForsettiHostCLI.verbs.map(\.spec).filter { ControlRequest.verbs.contains($0.name) }

  @Test func everyFieldIsAnOptionOrArgumentOfAServedVerb() {
    let options = Set(Self.served.flatMap(\.options).map(\.name))
    let arguments = Set(Self.served.flatMap(\.positionals).map(\.name))
    #expect(options.contains("from") && arguments.contains("MODULE_ID"), "the positive control")
    var seen: [String: ControlFailure.Field] = [:]
    for field in ControlFailure.Field.allCases {
      let spelling = FailureFields.spelling(field)
      switch spelling {
      case .option(let name): #expect(options.contains(name), "\(field): no served verb takes --\(name)")
      case .argument(let name): #expect(arguments.contains(name), "\(field): no served verb takes \(name)")
      }
      if let other = seen.updateValue(field, forKey: spelling.text) {
        Issue.record("\(field) and \(other) are both \(spelling.text)")
      }
    }
    #expect(FailureFields.spelling(.stateDirectory) == .option("state"))
    #expect(FailureFields.spelling(.inMemory) == .option("in-memory"))
  }

  @Test func aHostsFailureReadsAsTheOperatorsFlagsSayIt() {
    let cases: [(ControlFailure, String)] = [
      (
        .located(.failed, .stateDirectory, "/s/approvals.json", "cannot be read"),
        "--state /s/approvals.json: cannot be read"
      ),
      (
        .located(
          .notFound, .manifestsDirectory, "manifests", "no manifest declares module com.x", field: .module,
          value: "com.x"), "--manifests manifests: no manifest declares module com.x"
      ),
      (.located(.failed, .policyFile, "/p.json", "no such file"), "--policy /p.json: no such file"),
      (
        .located(.failed, .entitlementsFile, "/e.json", "no such file"),
        "--entitlements /e.json: no such file"
      ),
      (
        .invalid(.from, "next week", why: OverrideOrderError.instantExpected),
        "invalid value 'next week' for '--from': \(OverrideOrderError.instantExpected)"
      ),
      (
        .invalid(.capabilities, "networking", why: "com.x does not request these"),
        "invalid value 'networking' for '--capabilities': com.x does not request these"
      ),
      (ControlFailure(.busy, "the host is stopping"), "the host is stopping"),
    ]
    for (failure, shown) in cases { #expect(FailureFields.message(failure) == shown) }
  }

  /// An override order's own faults are refused before anything is sent, with the options
  /// that gave them.
  @Test func anOrdersOwnFaultsNameTheOptions() {
    let cases: [(OverrideOrderError, String)] = [
      (.onlyWithClear(.windows), "unexpected argument '--windows'"),
      (.notWithInMemory(.from, value: "2030-01-01T00:00:00Z"), "--from does not go with --in-memory"),
      (
        .notAnInstant(.until, "soon"),
        "invalid value 'soon' for '--until': \(OverrideOrderError.instantExpected)"
      ),
      (
        .untilNotAfterFrom(from: "2030-01-01T00:00:00Z", until: "2029-01-01T00:00:00Z"),
        "invalid value '2029-01-01T00:00:00Z' for '--until': expected an instant after --from 2030-01-01T00:00:00Z"
      ),
    ]
    for (fault, shown) in cases {
      #expect(OverrideCommand.usage(fault).description == shown)
      // The host says the same fault without a flag.
      #expect(fault.failure.message.firstRange(of: /--[A-Za-z]/) == nil, "\(fault.failure.message)")
    }
  }
}
