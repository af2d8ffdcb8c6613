import ForsettiBridge
import ForsettiCore
import Testing

/// The confinement report's one codec: what a worker sends is what the host reads and shows.
@Suite struct ConfinementReportTests {
  @Test func whatTheWorkerSendsTheHostReadsBack() throws {
    var r = ConfinementReport()
    r.capabilitiesDropped = true
    r.namespaces = ["user", "ipc", "uts"]
    r.landlockABI = 6
    r.signalsScoped = true
    r.seccomp = true
    r.seccompCalls = 93
    r.missing = ["network namespace: EPERM"]
    r.threadsBefore = 2
    let text = JSONWriter.string(.object(JSONObject(r.json)))
    #expect(ConfinementReport(json: text) == r)
    #expect(
      r.description
        == "capabilities dropped, user+ipc+uts namespaces, seccomp deny-list (93 calls), memory counted by its cgroup, landlock ABI 6 (signals, abstract sockets scoped), WARNING: 2 threads before confinement; missing: network namespace: EPERM"
    )
  }

  @Test func anUntrustedReportReadsAsTheWeakerClaim() {
    let r = ConfinementReport(json: #"{"capabilitiesDropped":"yes","seccomp":1,"namespaces":[3]}"#)
    #expect(
      r?.description
        == "capabilities KEPT, NO namespaces, NO seccomp, memory counted by its cgroup, NO landlock")
    #expect(ConfinementReport(json: "[]") == nil)
  }
}
