import ForsettiHost
import Glibc

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

  /// The thread that made the host: its lifecycle is kept there without locks (the facade's
  /// rule), so every host's-thread function refuses any other.
  let thread = pthread_self()

  init(_ host: ForsettiHost) { self.host = host }

  /// Runs `body` on the host behind `handle`, as a C function returning an error; `function`
  /// (its C name) is refused from any thread but the host's, unless `anyThread`.
  static func use(
    _ handle: OpaquePointer?, _ function: String, anyThread: Bool = false,
    _ body: (EmbedHost) throws(EmbedFailure) -> Void
  ) -> OpaquePointer? {
    EmbedError.outcome { () throws(EmbedFailure) in
      let h = try Handle.borrow(handle, "host", as: EmbedHost.self)
      if !anyThread, pthread_equal(h.thread, pthread_self()) == 0 {
        throw .wrongState(
          "\(function) from a thread other than the host's (the one that called forsetti_embed_host_new); "
            + "from another thread only forsetti_embed_host_request_stop and forsetti_embed_host_fd may be called"
        )
      }
      try body(h)
    }
  }

  /// Refuses what only a started, not yet stopped host can do.
  func requireRunning(_ what: String) throws(EmbedFailure) {
    guard started else { throw .wrongState("\(what) before forsetti_embed_host_start") }
    guard !stopped else { throw .wrongState("\(what) after forsetti_embed_host_stop") }
  }
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

/// Judges and starts the modules.
@_cdecl("forsetti_embed_host_start")
public func forsettiEmbedHostStart(_ host: OpaquePointer?) -> OpaquePointer? {
  EmbedHost.use(host, "forsetti_embed_host_start") { h throws(EmbedFailure) in
    guard !h.started else { throw .wrongState("forsetti_embed_host_start called twice") }
    do { try h.host.start() } catch { throw .host("\(error)") }
    h.started = true
  }
}

/// Stops every module.
@_cdecl("forsetti_embed_host_stop")
public func forsettiEmbedHostStop(_ host: OpaquePointer?) -> OpaquePointer? {
  EmbedHost.use(host, "forsetti_embed_host_stop") { h throws(EmbedFailure) in
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
  guard pthread_equal(h.thread, pthread_self()) != 0 else {
    // A void function cannot refuse: it says so and leaves the host alone (its modules keep
    // running, its memory is kept) rather than race the host's thread.
    let text =
      "forsetti_embed_host_delete from a thread other than the host's: ignored; delete it on its own thread\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    return
  }
  if h.started && !h.stopped {
    h.host.stop()
    h.stopped = true
  }
  Handle.release(host, as: EmbedHost.self)
}
