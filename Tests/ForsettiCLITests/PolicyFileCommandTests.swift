import ForsettiTestSupport
import Foundation
import Testing

/// `--policy FILE`: `check` and `explain` name the rule that denied, a bad file stops the command
/// with where it is wrong, and a running host follows the file as it is rewritten.
@Suite(.onTestThreads, .serialized) struct PolicyFileCommandTests: LiveHostSuite {
  let dir = TemporaryDirectory("policyfile")

  static let denyAcmeNetworking = """
    {"default": "allow",
     "rules": [
       {"effect": "allow", "capabilities": ["storage"], "modules": ["*"]},
       {"effect": "allow", "capabilities": ["networking"], "modules": ["com.acme.gateway"]},
       {"effect": "deny", "capabilities": ["networking"], "modules": ["com.acme.*"]}
     ]}
    """

  @Test func checkAndExplainNameTheDenyingRule() throws {
    let file = dir.url("etc/policy.json")
    try dir.write("etc/policy.json", Self.denyAcmeNetworking)
    try dir.write(
      "m/a.json", CheckCommandTests.manifest(id: "com.acme.crm", entry: "a", caps: ["networking"]))
    try dir.write(
      "m/b.json", CheckCommandTests.manifest(id: "com.acme.gateway", entry: "b", caps: ["networking"]))
    let common = [
      "--manifests", dir.url("m"), "--approve-all", "--state", dir.url("state"), "--policy", file,
    ]
    let r = try HostBinary.run(["check"] + common)
    #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
    let rule = "denied by policy file \(file) rule 3 (deny networking for com.acme.*)"
    #expect(r.stdout.contains(rule), "\(r.stdout)")
    let explain = try HostBinary.run(["explain", "com.acme.crm"] + common)
    #expect(explain.stdout.contains("capabilityDenied"), "\(explain.stdout)")
    #expect(explain.stdout.contains("networking " + rule), "\(explain.stdout)")
    // The positive control: rule 2 comes first for the gateway, which passes.
    let gateway = try HostBinary.run(["explain", "com.acme.gateway"] + common)
    #expect(!gateway.stdout.contains("capabilityDenied"), "\(gateway.stdout)")
    #expect(gateway.stdout.contains("policy file \(file) (3 rules, default allow)"), "\(gateway.stdout)")
  }

  @Test func aBadFileStopsTheCommandSayingWhere() throws {
    try dir.write("m/a.json", CheckCommandTests.manifest(id: "com.acme.crm", entry: "a"))
    let file = dir.url("policy.json")
    try dir.write(
      "policy.json",
      #"{"default":"allow","rules":[{"effect":"deny","capabilities":["*"],"modules":["x"]},{"effect":"deny","capabilities":["netwoking"],"modules":["*"]}]}"#
    )
    let r = try HostBinary.run(["check", "--manifests", dir.url("m"), "--policy", file])
    #expect(r.status == 2)
    #expect(r.stderr.contains(file), "\(r.stderr)")
    #expect(
      r.stderr.contains(
        #"rule 2, field "capabilities": unknown capability "netwoking"; did you mean "networking"?"#))
    #expect(r.stderr.contains("file_export"), "\(r.stderr)")
    let missing = try HostBinary.run([
      "check", "--manifests", dir.url("m"), "--policy", dir.url("nothere.json"),
    ])
    #expect(missing.status == 2)
    #expect(missing.stderr.contains("no such file"), "\(missing.stderr)")
  }

  @Test func aRunningHostFollowsTheRewrittenFile() throws {
    try module("com.acme.crm", capabilities: ["networking"])
    try module("com.test.keeper")
    let file = dir.url("etc/policy.json")
    try LiveHost.replaceFile(file, with: Self.denyAcmeNetworking)
    let host = try launch(["--approve-all", "--policy", file])
    defer { host.stop() }
    var w = published(["com.acme.crm": "blocked/capabilityDenied", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))
    try #require(answering(host), why(w, host))
    // explain exits 1 for a blocked module; its text is what counts.
    let explain = try HostBinary.run(["explain", "com.acme.crm", "--state", state])
    #expect(explain.stderr.contains("answered by the host running"), "\(explain.stderr)")
    #expect(
      explain.stdout.contains("denied by policy file \(file) rule 3 (deny networking for com.acme.*)"),
      "\(explain.stdout)")

    try LiveHost.replaceFile(file, with: #"{"default": "allow"}"#)
    w = published(["com.acme.crm": "started", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))
    #expect(host.await("hello from com.acme.crm") != nil, "\(host.lines)")

    try LiveHost.replaceFile(file, with: Self.denyAcmeNetworking)
    w = published(["com.acme.crm": "blocked/capabilityDenied", "com.test.keeper": "started"], by: host)
    try #require(w.reached, why(w, host))
    #expect(host.await("bye from com.acme.crm") != nil, "\(host.lines)")

    // A rewrite that is not valid changes nothing until it is fixed, and says where it is wrong:
    // the last valid policy stays in force.
    let mark = host.lines.count
    try LiveHost.replaceFile(file, with: #"{"default": "allow", "rules": [{"effect": "allow"}]}"#)
    let refused = host.await(
      #"policy: --policy \#(file): rule 1: field "capabilities" is missing"#, from: mark)
    #expect(refused != nil, "\(host.lines.suffix(10))")
    w = published(["com.acme.crm": "blocked/capabilityDenied", "com.test.keeper": "started"], by: host)
    #expect(w.reached, why(w, host))
    // Issue 40: list and explain exited 2 and the page's table went empty. They answer, by the
    // policy in force, and say which file is wrong, where, and that the last valid one rules.
    let list = try HostBinary.run(["list", "--state", state])
    #expect(list.status == 1, "one module is blocked: \(list.stderr)")
    #expect(
      list.stdout.contains("com.acme.crm") && list.stdout.contains("capabilityDenied"), "\(list.stdout)")
    #expect(
      list.stderr.contains("warning: --policy \(file): rule 1") && list.stderr.contains("last valid policy"),
      "\(list.stderr)")
    let json = try HostBinary.run(["list", "--state", state, "--json"])
    #expect(json.stdout.contains("\"problems\"") && json.stdout.contains("rule 1"), "\(json.stdout)")
    let explained = try HostBinary.run(["explain", "com.acme.crm", "--state", state])
    #expect(explained.status == 1 && explained.stdout.contains("rule 3 (deny networking"), "\(explained)")
    #expect(explained.stderr.contains("last valid policy"), "\(explained.stderr)")
    // Mended: said once, and no warning any more (the control).
    try LiveHost.replaceFile(file, with: Self.denyAcmeNetworking)
    #expect(host.await("the policy file reads as valid again", from: mark) != nil, "\(host.lines.suffix(10))")
    let after = try HostBinary.run(["list", "--state", state])
    #expect(!after.stderr.contains("warning"), "\(after.stderr)")
  }
}
