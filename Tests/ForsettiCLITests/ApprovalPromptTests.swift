import ForsettiTestSupport
import Foundation
import Testing

/// `run`'s approval prompt on a terminal (a pseudo-terminal of `script(1)`): it is asked inside
/// the host's start, on the manifests its first judgement discovered, so what the operator
/// approves there is granted at once, and what they refuse stays pending.
@Suite(.onTestThreads) struct ApprovalPromptTests {
  let dir = TemporaryDirectory("approval-prompt")

  init() throws {
    var f = ModuleFixture(moduleID: "com.test.prompted", entryPoint: "prompted_entry")
    f.start = "fixture_log(\"prompted module started\"); return FORSETTI_OK;"
    try f.install(in: dir, capabilities: ["storage"])
  }

  /// `run` on a terminal whose operator types `answer`.
  func run(answering answer: String) throws -> ProcessResult {
    let command = [
      HostBinary.path, "run", "--for", "0", "--in-process", "--manifests", dir.url("manifests"), "--plugins",
      dir.url("plugins"), "--state", dir.url("state"),
    ].map { "'\($0)'" }.joined(separator: " ")
    return try ProcessRunner.run(
      "/bin/bash", ["-c", "printf '\(answer)\\n' | script -qefc \"\(command)\" /dev/null"])
  }

  @Test func whatTheOperatorApprovesAtThePromptIsGrantedAtOnce() throws {
    let r = try run(answering: "y")
    #expect(r.stdout.contains("com.test.prompted 1.0.0) asks for: storage. Approve? [y/N]"), "\(r.stdout)")
    #expect(r.stdout.contains("started com.test.prompted"), "\(r.stdout)")
    let approvals = try String(contentsOfFile: dir.url("state/approvals.json"), encoding: .utf8)
    #expect(approvals.contains("com.test.prompted") && approvals.contains("storage"), "\(approvals)")
    // Asked once: the second start finds it approved.
    let again = try run(answering: "y")
    #expect(!again.stdout.contains("Approve?"), "\(again.stdout)")
    #expect(again.stdout.contains("started com.test.prompted"), "\(again.stdout)")
  }

  @Test func whatTheOperatorRefusesStaysPending() throws {
    let r = try run(answering: "n")
    #expect(r.stdout.contains("Approve? [y/N]"), "\(r.stdout)")
    #expect(!r.stdout.contains("started com.test.prompted"), "\(r.stdout)")
    #expect(r.stdout.contains("approvalPending"), "\(r.stdout)")
  }
}
