/// Swift objects handed to C as opaque pointers (`forsetti_embed_config *` …): giving one
/// retains it for the C caller, releasing it is the matching `*_delete`. C cannot say which type
/// a pointer was made from; passing one handle type where another is due is the caller's error,
/// as with any C API.
enum Handle {
  /// A retained pointer to `object`, for C to own.
  static func give<T: AnyObject>(_ object: T) -> OpaquePointer {
    OpaquePointer(Unmanaged.passRetained(object).toOpaque())
  }

  /// The object behind a non-NULL handle, borrowed.
  static func peek<T: AnyObject>(_ handle: OpaquePointer, as type: T.Type) -> T {
    Unmanaged<T>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue()
  }

  /// The object behind `handle`, or a refusal naming the NULL parameter.
  static func borrow<T: AnyObject>(_ handle: OpaquePointer?, _ name: String, as type: T.Type)
    throws(EmbedFailure) -> T
  {
    guard let handle else { throw .nullArgument(name) }
    return peek(handle, as: type)
  }

  /// Gives up C's ownership of `handle`.
  static func release<T: AnyObject>(_ handle: OpaquePointer, as type: T.Type) {
    Unmanaged<T>.fromOpaque(UnsafeRawPointer(handle)).release()
  }
}
