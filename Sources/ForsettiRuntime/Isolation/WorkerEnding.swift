import ForsettiCore
import Glibc

/// How a worker ended, decided in one place for every site that sees one end (supervision of a
/// running module, a reload's grace period, a stop): the first of a protocol violation, a hung
/// role handler the host killed, a clean exit, or else a crash with its wait status.
enum WorkerEnding: Equatable, Sendable, CustomStringConvertible {
  /// It broke the worker protocol; killed, its state no longer trusted.
  case violated(ProtocolViolation)
  /// The host killed it because a role handler held its turn past the deadline.
  case hung(verdict: String, exit: String)
  /// It exited with status 0.
  case exited
  /// Any other end: a signal, a non-zero status, or not reaped yet (`exit` says which).
  case crashed(exit: String)

  /// The pure rule. `status` is the wait status (nil: killed, not yet reaped) and
  /// `cgroupVerdict` what the worker's cgroup says of it ("killed by the kernel at its memory
  /// limit").
  static func classify(
    violation: ProtocolViolation?, hung: String?, status: Int32?, cgroupVerdict: String?
  ) -> WorkerEnding {
    if let violation { return .violated(violation) }
    let exit = describe(status: status) + (cgroupVerdict.map { "; " + $0 } ?? "")
    if let hung { return .hung(verdict: hung, exit: exit) }
    if status == 0 { return .exited }
    return .crashed(exit: exit)
  }

  /// "killed by SIGKILL (Killed)", or what is known of a worker not reaped in time.
  static func describe(status: Int32?) -> String {
    guard let status else { return "killed, not yet reaped" }
    return describe(status: status)
  }

  /// "killed by SIGSEGV (Segmentation fault)" or "exited with status 3".
  static func describe(status: Int32) -> String {
    let sig = status & 0x7F
    if sig != 0 { return "killed by \(signalName(sig)) (\(String(cString: strsignal(sig))))" }
    return "exited with status \((status >> 8) & 0xFF)"
  }

  /// "SIGSEGV", or "signal 42" for one without a name here: the one table of signal names (an
  /// exit's description, a crash report, the `signal` label of the crash metric).
  static func signalName(_ sig: Int32) -> String {
    let names: [Int32: String] = [
      SIGSEGV: "SIGSEGV", SIGABRT: "SIGABRT", SIGKILL: "SIGKILL", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE",
      SIGILL: "SIGILL", SIGXCPU: "SIGXCPU", SIGTERM: "SIGTERM", SIGSYS: "SIGSYS", SIGTRAP: "SIGTRAP",
    ]
    return names[sig] ?? "signal \(sig)"
  }

  /// The reason code a failing end is recorded under.
  var reason: ReasonCode {
    if case .violated = self { return .protocolViolation }
    return .crashed
  }

  /// The wait status in words, without the word "worker": "killed by SIGSEGV (Segmentation
  /// fault)"; the violation for one that broke the protocol.
  var exit: String {
    switch self {
    case .violated(let v): v.description
    case .hung(let verdict, let exit): "\(exit) (\(verdict))"
    case .exited: "exited with status 0"
    case .crashed(let exit): exit
    }
  }

  /// "worker killed by SIGSEGV (Segmentation fault)", "hung …; worker killed by SIGKILL (…)",
  /// or the violation.
  var description: String {
    switch self {
    case .violated(let v): v.description
    case .hung(let verdict, let exit): "\(verdict); worker \(exit)"
    case .exited: "worker exited with status 0"
    case .crashed(let exit): "worker \(exit)"
    }
  }
}
