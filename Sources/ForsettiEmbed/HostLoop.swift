import CForsettiEmbed
import ForsettiHost

/// Runs the host for `seconds` (FORSETTI_EMBED_NO_DEADLINE: no deadline), until stopped or
/// signalled.
@_cdecl("forsetti_embed_host_run")
public func forsettiEmbedHostRun(
  _ host: OpaquePointer?, _ seconds: Double, _ handleSignals: Bool, _ ending: UnsafeMutablePointer<Int32>?
) -> OpaquePointer? {
  EmbedHost.use(host, "forsetti_embed_host_run") { h throws(EmbedFailure) in
    try h.requireRunning("forsetti_embed_host_run")
    // -5 is a mistake (a duration computed wrong), not a wish to run for ever: only the
    // header's constant means no deadline.
    guard seconds == FORSETTI_EMBED_NO_DEADLINE || (seconds >= 0 && seconds <= maxRunSeconds) else {
      throw .invalidValue(
        "seconds", value: "\(seconds)",
        why: "expected FORSETTI_EMBED_NO_DEADLINE or 0 to \(Int(maxRunSeconds))")
    }
    let deadline =
      seconds == FORSETTI_EMBED_NO_DEADLINE ? nil : ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    let ended = h.host.run(until: deadline, handlingSignals: handleSignals)
    ending?.pointee =
      switch ended {
      case .deadline: FORSETTI_EMBED_ENDED_DEADLINE
      case .stopRequested: FORSETTI_EMBED_ENDED_STOP_REQUESTED
      case .signal: FORSETTI_EMBED_ENDED_SIGNAL
      case .stateDirectoryReplaced: FORSETTI_EMBED_ENDED_STATE_DIRECTORY_REPLACED
      }
  }
}

/// A deadline beyond about 31 years is a mistake, and would overflow the clock's arithmetic.
private let maxRunSeconds = 1e9

/// Milliseconds until `process` is due, or -1.
@_cdecl("forsetti_embed_host_next_due")
public func forsettiEmbedHostNextDue(_ host: OpaquePointer?, _ milliseconds: UnsafeMutablePointer<Int64>?)
  -> OpaquePointer?
{
  EmbedHost.use(host, "forsetti_embed_host_next_due") { h throws(EmbedFailure) in
    guard let milliseconds else { throw .nullArgument("milliseconds") }
    try h.requireRunning("forsetti_embed_host_next_due")
    guard let due = h.host.nextDue else {
      milliseconds.pointee = -1
      return
    }
    let left = ContinuousClock.now.duration(to: due) / .milliseconds(1)
    milliseconds.pointee = Int64(min(max(0, left.rounded(.up)), 1e15))
  }
}

/// Handles what happened since the last call.
@_cdecl("forsetti_embed_host_process")
public func forsettiEmbedHostProcess(_ host: OpaquePointer?) -> OpaquePointer? {
  EmbedHost.use(host, "forsetti_embed_host_process") { h throws(EmbedFailure) in
    try h.requireRunning("forsetti_embed_host_process")
    h.host.process()
  }
}

/// Makes `run` return soon; any thread.
@_cdecl("forsetti_embed_host_request_stop")
public func forsettiEmbedHostRequestStop(_ host: OpaquePointer?) -> OpaquePointer? {
  EmbedHost.use(host, "forsetti_embed_host_request_stop", anyThread: true) { h in h.host.requestStop() }
}

/// The descriptor an application's loop polls: readable when `process` has work.
@_cdecl("forsetti_embed_host_fd")
public func forsettiEmbedHostFD(_ host: OpaquePointer?, _ fd: UnsafeMutablePointer<Int32>?) -> OpaquePointer?
{
  EmbedHost.use(host, "forsetti_embed_host_fd", anyThread: true) { h throws(EmbedFailure) in
    guard let fd else { throw .nullArgument("fd") }
    guard h.host.wakeDescriptor >= 0 else { throw .host("the kernel refused the host an eventfd") }
    fd.pointee = h.host.wakeDescriptor
  }
}
