import ForsettiCore
import Testing

@Suite("ApprovalRules.evaluate (Apsule rules)")
struct ApprovalEvaluateTests {
  @Test("first run: everything requested is pending and nothing may be stored yet")
  func firstRun() {
    let d = ApprovalRules.evaluate(requested: [.storage, .telemetry], approved: nil)
    #expect(d.firstRun)
    #expect(d.granted.isEmpty)
    #expect(d.pending == [.storage, .telemetry])
    #expect(d.storedAfter == nil)
  }

  @Test("first run with nothing requested passes and stores the empty set")
  func firstRunEmpty() {
    let d = ApprovalRules.evaluate(requested: [], approved: nil)
    #expect(d.firstRun)
    #expect(d.pending.isEmpty)
    #expect(d.storedAfter == [])
  }

  @Test("the same set does not ask again")
  func sameSet() {
    let d = ApprovalRules.evaluate(requested: [.storage, .telemetry], approved: [.storage, .telemetry])
    #expect(!d.firstRun)
    #expect(d.pending.isEmpty)
    #expect(d.granted == [.storage, .telemetry])
    #expect(d.storedAfter == [.storage, .telemetry])
  }

  @Test("a reduced set does not ask and shrinks the stored approval at once")
  func reduced() {
    let d = ApprovalRules.evaluate(requested: [.storage], approved: [.storage, .telemetry, .networking])
    #expect(d.pending.isEmpty)
    #expect(d.granted == [.storage])
    #expect(d.storedAfter == [.storage])
  }

  @Test("a reduction to nothing stores the empty set")
  func reducedToNothing() {
    let d = ApprovalRules.evaluate(requested: [], approved: [.storage])
    #expect(d.pending.isEmpty)
    #expect(d.storedAfter == [])
  }

  @Test("a broadened set asks only for the added capabilities; the old ones stay granted")
  func broadened() {
    let d = ApprovalRules.evaluate(requested: [.storage, .telemetry, .networking], approved: [.storage])
    #expect(!d.firstRun)
    #expect(d.pending == [.telemetry, .networking])
    #expect(d.granted == [.storage])
    #expect(d.storedAfter == [.storage])
  }

  @Test("a swapped set asks for the new capability and drops the old one")
  func swapped() {
    let d = ApprovalRules.evaluate(requested: [.storage, .networking], approved: [.storage, .telemetry])
    #expect(d.pending == [.networking])
    #expect(d.granted == [.storage])
    #expect(d.storedAfter == [.storage])
  }

  @Test("a capability dropped by one version and re-added by the next is asked for again")
  func reAddedAfterReduction() throws {
    // v1: first run, the user approves everything it asked for.
    let v1: Set<Capability> = [.storage, .telemetry]
    #expect(ApprovalRules.evaluate(requested: v1, approved: nil).pending == v1)
    var stored: Set<Capability>? = v1

    // v2 drops telemetry: nothing to ask, and the store shrinks.
    let d2 = ApprovalRules.evaluate(requested: [.storage], approved: stored)
    #expect(d2.pending.isEmpty)
    stored = d2.storedAfter
    #expect(stored == [.storage])

    // v3 re-adds telemetry: it must be approved again (stricter than a union of past approvals).
    let d3 = ApprovalRules.evaluate(requested: v1, approved: stored)
    #expect(d3.pending == [.telemetry])
    #expect(d3.granted == [.storage])
    #expect(!d3.firstRun)

    // v3 runs with what stays approved; the re-added capability waits and is not granted.
    let ledger = ApprovalLedger(approved: ["com.example.notes": try #require(d3.storedAfter)])
    let v3 = ManifestModel.make(capabilities: [.storage, .telemetry])
    #expect(ApprovalRules.check(v3, approvals: ledger) == .pass)
    #expect(ApprovalRules.granted(v3, approvals: ledger) == [.storage])
    let detail = ApprovalRules.passDetail(v3, approvals: ledger)
    #expect(detail.hasPrefix("update adds telemetry, awaiting approval"))
    #expect(detail.hasSuffix("runs with storage"))
  }
}

@Suite("ApprovalRules.check")
struct ApprovalCheckTests {
  @Test("first run blocks with approvalPending listing the capabilities and how to approve")
  func firstRunPending() {
    let outcome = ApprovalRules.check(
      ManifestModel.make(capabilities: [.telemetry, .storage]), approvals: .init())
    #expect(outcome.failureReason == .approvalPending)
    #expect(
      outcome.failureDetail
        == "first run: approval needed for storage, telemetry; approve with `forsetti-host approve com.example.notes`"
    )
  }

  @Test("an update that adds capabilities runs with the old approval; only the added ones wait")
  func updatePending() {
    let ledger = ApprovalLedger(approved: ["com.example.notes": [.storage]])
    let m = ManifestModel.make(capabilities: [.storage, .networking])
    #expect(ApprovalRules.check(m, approvals: ledger) == .pass)
    #expect(ApprovalRules.granted(m, approvals: ledger) == [.storage])
    #expect(
      ApprovalRules.passDetail(m, approvals: ledger).hasPrefix("update adds networking, awaiting approval"))
    #expect(ApprovalRules.granted(m, approvals: .init(approveAll: true)) == [.storage, .networking])
  }

  @Test("approved capabilities pass, and a reduction passes")
  func approved() {
    let ledger = ApprovalLedger(approved: ["com.example.notes": [.storage, .telemetry]])
    #expect(
      ApprovalRules.check(ManifestModel.make(capabilities: [.storage, .telemetry]), approvals: ledger)
        == .pass)
    #expect(ApprovalRules.check(ManifestModel.make(capabilities: [.storage]), approvals: ledger) == .pass)
  }

  @Test("approvals are per module ID")
  func perModule() {
    let ledger = ApprovalLedger(approved: ["com.example.other": [.storage]])
    #expect(
      ApprovalRules.check(ManifestModel.make(capabilities: [.storage]), approvals: ledger).failureReason
        == .approvalPending)
  }

  @Test("approveAll passes every request, even on first run")
  func approveAll() {
    let outcome = ApprovalRules.check(
      ManifestModel.make(capabilities: Capability.allCases), approvals: ApprovalLedger(approveAll: true))
    #expect(outcome == .pass)
  }

  @Test("an empty request passes on first run")
  func emptyRequestFirstRun() {
    #expect(ApprovalRules.check(ManifestModel.make(capabilities: []), approvals: .init()) == .pass)
  }
}

@Suite("ApprovalLedger.decode")
struct ApprovalLedgerDecodeTests {
  @Test("a well-formed approvals file decodes per module")
  func good() throws {
    let value = try JSONParser.parse(
      """
      {"version": 1, "modules": {
        "com.example.notes": {"capabilities": ["storage", "telemetry"]},
        "com.example.empty": {"capabilities": []}
      }}
      """)
    let ledger = try ApprovalLedger.decode(value).get()
    #expect(ledger.approved == ["com.example.notes": [.storage, .telemetry], "com.example.empty": []])
    #expect(ledger.approveAll == false)
  }

  @Test("an empty modules object is an empty ledger")
  func emptyModules() throws {
    #expect(
      try ApprovalLedger.decode(try JSONParser.parse(#"{"version":1,"modules":{}}"#)).get().approved.isEmpty)
  }

  @Test(
    "a file without a modules object is malformed at modules",
    arguments: [#"{"version": 1}"#, #"{"modules": []}"#, #"{"modules": null}"#, #"[]"#, #""modules""#])
  func noModules(_ text: String) throws {
    #expect(
      ApprovalLedger.decode(try JSONParser.parse(text))
        == .failure(.malformed(field: "modules", expected: "an object keyed by module ID")))
  }

  @Test(
    "an entry without a capabilities array is malformed at that module",
    arguments: [#"{}"#, #"{"capabilities": "storage"}"#, #"["storage"]"#])
  func badEntry(_ entry: String) throws {
    let result = ApprovalLedger.decode(
      try JSONParser.parse(#"{"modules": {"com.example.notes": \#(entry)}}"#))
    #expect(
      result
        == .failure(
          .malformed(field: "modules.com.example.notes.capabilities", expected: "an array of capabilities")))
  }

  @Test("unknown capability values are malformed", arguments: [#""camera""#, "1", "null", #""Storage""#])
  func badCapability(_ item: String) throws {
    let result = ApprovalLedger.decode(
      try JSONParser.parse(#"{"modules": {"com.example.notes": {"capabilities": ["storage", \#(item)]}}}"#))
    guard case .failure(let error) = result else {
      Issue.record("decoded an unknown capability \(item)")
      return
    }
    #expect(
      error == .malformed(field: "modules.com.example.notes.capabilities", expected: "capability raw values"))
    #expect(error.description == "modules.com.example.notes.capabilities: expected capability raw values")
  }
}
