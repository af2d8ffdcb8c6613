import CForsettiEmbed
import ForsettiHost

/// Runs the host for `seconds` (negative: no deadline), until stopped or signalled.
@_cdecl("forsetti_embed_host_run")
public func forsettiEmbedHostRun(
  _ host: OpaquePointer?, _ seconds: Double, _ handleSignals: Bool, _ ending: UnsafeMutablePointer<Int32>?
) -> OpaquePointer? {
  EmbedHost.use(host) { h throws(EmbedFailure) in
    try h.requireRunning("forsetti_embed_host_run")
    guard !seconds.isNaN, seconds <= maxRunSeconds else {
      throw .invalidValue(
        "seconds", value: "\(seconds)",
        why: "expected FORSETTI_EMBED_NO_DEADLINE or 0 to \(Int(maxRunSeconds))")
    }
    let deadline = seconds < 0 ? nil : ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
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
  EmbedHost.use(host) { h throws(EmbedFailure) in
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
  EmbedHost.use(host) { h throws(EmbedFailure) in
    try h.requireRunning("forsetti_embed_host_process")
    h.host.process()
  }
}

/// Makes `run` return soon; any thread.
@_cdecl("forsetti_embed_host_request_stop")
public func forsettiEmbedHostRequestStop(_ host: OpaquePointer?) -> OpaquePointer? {
  EmbedHost.use(host) { h in h.host.requestStop() }
}
