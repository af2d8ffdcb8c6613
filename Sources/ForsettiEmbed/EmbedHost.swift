import CForsettiEmbed
import ForsettiHost
import ForsettiRuntime
import Synchronization

/// `void (*)(void *ctx, const char *module_id, const char *state, const char *reason)`.
public typealias ObserverFunction =
  @convention(c) (
    UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?
  ) -> Void

/// The object behind `forsetti_embed_host *`: the facade and where it is in its life, which
/// the facade's contract leaves to its caller (start once, call after start).
final class EmbedHost {
  let host: ForsettiHost
  var started = false
  var stopped = false
  /// The application's observer now; the facade keeps every observer it is given, so one
  /// forwarding observer is given once and this box says where it forwards.
  let observer = ObserverBox()
  var observing = false

  init(_ host: ForsettiHost) { self.host = host }

  /// Runs `body` on the host behind `handle`, as a C function returning an error.
  static func use(_ handle: OpaquePointer?, _ body: (EmbedHost) throws(EmbedFailure) -> Void)
    -> OpaquePointer?
  {
    EmbedError.outcome { () throws(EmbedFailure) in
      try body(Handle.borrow(handle, "host", as: EmbedHost.self))
    }
  }

  /// Refuses what only a started, not yet stopped host can do.
  func requireRunning(_ what: String) throws(EmbedFailure) {
    guard started else { throw .wrongState("\(what) before forsetti_embed_host_start") }
    guard !stopped else { throw .wrongState("\(what) after forsetti_embed_host_stop") }
  }
}

/// Where module changes go: the application's observer of the moment.
final class ObserverBox: Sendable {
  private let current = Mutex<CCallback<ObserverFunction>?>(nil)

  /// Forwards to `callback` from now on; nil forwards nowhere.
  func set(_ callback: CCallback<ObserverFunction>?) { current.withLock { $0 = callback } }

  /// Tells the application's observer of a module's change.
  func forward(_ change: HostChange) {
    guard case .module(let record) = change, let callback = current.withLock({ $0 }) else { return }
    callback.call { f, context in
      withOptionalCString(record.moduleID) { id in
        record.state.name.withCString { state in
          withOptionalCString(record.state.reason?.rawValue) { reason in f(context, id, state, reason) }
        }
      }
    }
  }
}

/// `body` with `text` as a C string, or NULL for nil.
private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
  guard let text else { return body(nil) }
  return text.withCString { body($0) }
}

/// Makes a host from a configuration into `*hostOut`.
@_cdecl("forsetti_embed_host_new")
public func forsettiEmbedHostNew(_ config: OpaquePointer?, _ hostOut: UnsafeMutablePointer<OpaquePointer?>?)
  -> OpaquePointer?
{
  EmbedError.outcome { () throws(EmbedFailure) in
    let c = try Handle.borrow(config, "config", as: EmbedConfig.self)
    guard let hostOut else { throw .nullArgument("host_out") }
    let facade: ForsettiHost
    do {
      facade = try ForsettiHost(try c.configuration())
      for service in c.services { try facade.register(service) }
    } catch let error as EmbedFailure {
      throw error
    } catch {
      throw .host("\(error)")
    }
    hostOut.pointee = Handle.give(EmbedHost(facade))
  }
}

/// Sets (or with NULL removes) the observer of module changes.
@_cdecl("forsetti_embed_host_observe")
public func forsettiEmbedHostObserve(
  _ host: OpaquePointer?, _ observer: ObserverFunction?, _ context: UnsafeMutableRawPointer?
) -> OpaquePointer? {
  EmbedHost.use(host) { h in
    h.observer.set(observer.map { CCallback($0, context) })
    guard !h.observing else { return }
    h.observing = true
    h.host.observe { [box = h.observer] change in box.forward(change) }
  }
}

/// Judges and starts the modules.
@_cdecl("forsetti_embed_host_start")
public func forsettiEmbedHostStart(_ host: OpaquePointer?) -> OpaquePointer? {
  EmbedHost.use(host) { h throws(EmbedFailure) in
    guard !h.started else { throw .wrongState("forsetti_embed_host_start called twice") }
    do { try h.host.start() } catch { throw .host("\(error)") }
    h.started = true
  }
}

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

/// Stops every module.
@_cdecl("forsetti_embed_host_stop")
public func forsettiEmbedHostStop(_ host: OpaquePointer?) -> OpaquePointer? {
  EmbedHost.use(host) { h throws(EmbedFailure) in
    try h.requireRunning("forsetti_embed_host_stop")
    h.host.stop()
    h.stopped = true
  }
}

/// Stops what runs and frees the host; NULL is ignored.
@_cdecl("forsetti_embed_host_delete")
public func forsettiEmbedHostDelete(_ host: OpaquePointer?) {
  guard let host else { return }
  let h = Handle.peek(host, as: EmbedHost.self)
  if h.started && !h.stopped {
    h.host.stop()
    h.stopped = true
  }
  Handle.release(host, as: EmbedHost.self)
}
