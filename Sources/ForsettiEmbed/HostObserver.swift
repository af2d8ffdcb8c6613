import ForsettiHost
import ForsettiRuntime
import Synchronization

/// `void (*)(void *ctx, const char *module_id, const char *state, const char *reason)`.
public typealias ObserverFunction =
  @convention(c) (
    UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?
  ) -> Void

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

/// Sets (or with NULL removes) the observer of module changes.
@_cdecl("forsetti_embed_host_observe")
public func forsettiEmbedHostObserve(
  _ host: OpaquePointer?, _ observer: ObserverFunction?, _ context: UnsafeMutableRawPointer?
) -> OpaquePointer? {
  EmbedHost.use(host, "forsetti_embed_host_observe") { h in
    h.observer.set(observer.map { CCallback($0, context) })
    guard !h.observing else { return }
    h.observing = true
    h.host.observe { [box = h.observer] change in box.forward(change) }
  }
}
