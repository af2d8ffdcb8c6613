import CForsettiEmbed

/// The object behind `forsetti_embed_error *`: a reason code and a NUL-terminated message whose
/// storage lives as long as the object, so the pointer `forsetti_embed_error_message` hands out
/// stays valid until `forsetti_embed_error_delete`.
final class EmbedError {
  let code: Int32
  let message: UnsafeMutableBufferPointer<CChar>

  init(_ failure: EmbedFailure) {
    code = failure.code
    let bytes = Array(failure.description.utf8).map { CChar(bitPattern: $0 == 0 ? 0x3F : $0) }
    message = .allocate(capacity: bytes.count + 1)
    _ = message.initialize(from: bytes + [0])
  }

  deinit { message.deallocate() }

  /// Runs `body`; a failure becomes an error the C caller owns, success NULL.
  static func outcome(_ body: () throws(EmbedFailure) -> Void) -> OpaquePointer? {
    do {
      try body()
      return nil
    } catch {
      return Handle.give(EmbedError(error))
    }
  }
}

/// The reason code of an error (FORSETTI_EMBED_ERROR_*); 0 for NULL.
@_cdecl("forsetti_embed_error_code")
public func forsettiEmbedErrorCode(_ error: OpaquePointer?) -> Int32 {
  guard let error else { return 0 }
  return Handle.peek(error, as: EmbedError.self).code
}

/// The error's message, borrowed until the error is deleted; "" for NULL.
@_cdecl("forsetti_embed_error_message")
public func forsettiEmbedErrorMessage(_ error: OpaquePointer?) -> UnsafePointer<CChar>? {
  guard let error else {
    // A static string: NUL-terminated, never freed.
    let empty: StaticString = ""
    return UnsafeRawPointer(empty.utf8Start).assumingMemoryBound(to: CChar.self)
  }
  return UnsafePointer(Handle.peek(error, as: EmbedError.self).message.baseAddress)
}

/// Frees an error; NULL is ignored.
@_cdecl("forsetti_embed_error_delete")
public func forsettiEmbedErrorDelete(_ error: OpaquePointer?) {
  guard let error else { return }
  Handle.release(error, as: EmbedError.self)
}
