import Synchronization

/// A C function pointer with the context the application gave with it.
///
/// `@unchecked Sendable` because C cannot say what its context may do: `forsetti/embed.h`
/// makes the application promise, per callback, that it may be called on a host thread, and
/// `call` never lets two calls of one callback overlap (its lock), so a context need not be
/// safe for concurrent use, only for use from another thread.
final class CCallback<Function>: @unchecked Sendable {
  private let function: Function
  private let context: UnsafeMutableRawPointer?
  private let turn = Mutex(())

  init(_ function: Function, _ context: UnsafeMutableRawPointer?) {
    self.function = function
    self.context = context
  }

  /// Calls the function with its context, one call at a time.
  func call<R>(_ body: (Function, UnsafeMutableRawPointer?) -> R) -> R {
    turn.withLock { _ in body(function, context) }
  }
}
