import ForsettiRuntime
import Testing

/// The rule of what a worker's environment holds (`WorkerEnvironment.swift`), over a host
/// environment holding secrets, locale variables and what a service manager hands a host.
@Suite struct WorkerEnvironmentRuleTests {
  static let host = [
    "PATH": "/usr/bin:/bin", "LANG": "de_DE.UTF-8", "LC_TIME": "C", "AWS_SECRET_ACCESS_KEY": "secret",
    "DATABASE_URL": "postgres://u:p@db/x", "NOTIFY_SOCKET": "/run/systemd/notify", "HOME": "/root",
    "TMPDIR": "/var/tmp", "SWIFT_BACKTRACE": "enable=yes", "REGION": "eu-north-1",
  ]

  @Test func theBaseHoldsPathAndTheLocaleOnly() {
    #expect(
      WorkerEnvironment.base(host: Self.host) == [
        "PATH": "/usr/bin:/bin", "LANG": "de_DE.UTF-8", "LC_TIME": "C", "SWIFT_BACKTRACE": "enable=no",
      ])
  }

  @Test func aModuleGetsItsSandboxAndWhatTheOperatorPassed() throws {
    var e = WorkerEnvironment()
    try e.pass("REGION", host: Self.host)
    try e.pass("MODE=a=b", host: Self.host)
    try e.pass("MODE=c", host: Self.host)
    #expect(
      e.module(sandbox: "/s/m", host: Self.host) == [
        "PATH": "/usr/bin:/bin", "LANG": "de_DE.UTF-8", "LC_TIME": "C", "SWIFT_BACKTRACE": "enable=no",
        "REGION": "eu-north-1", "MODE": "c", "HOME": "/s/m", "TMPDIR": "/s/m/tmp",
      ])
  }

  @Test func badArgumentsAreRefusedWithTheirReason() {
    var e = WorkerEnvironment()
    #expect(throws: WorkerEnvironment.Refusal.invalidName("1X")) { try e.pass("1X=v", host: Self.host) }
    #expect(throws: WorkerEnvironment.Refusal.invalidName("A-B")) { try e.pass("A-B", host: Self.host) }
    #expect(throws: WorkerEnvironment.Refusal.invalidName("")) { try e.pass("=v", host: Self.host) }
    #expect(throws: WorkerEnvironment.Refusal.reserved("HOME")) { try e.pass("HOME=/x", host: Self.host) }
    #expect(throws: WorkerEnvironment.Refusal.reserved("TMPDIR")) { try e.pass("TMPDIR", host: Self.host) }
    #expect(throws: WorkerEnvironment.Refusal.notSet("NOPE")) { try e.pass("NOPE", host: Self.host) }
    #expect(e.passed.isEmpty)
  }
}
