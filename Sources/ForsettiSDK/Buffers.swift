import CForsetti

/// Reads a value whose size the host tells only when the buffer was too small (storage and
/// secure storage `get`): grows to the size it reports, a few times at most, since another
/// thread may replace the value between two tries.
enum GrowingRead {
  /// The bytes read, or nil for NOT_FOUND. `attempt` fills the buffer and sets the length.
  static func read(
    initialCapacity: Int, limit: Int,
    _ attempt: (UnsafeMutableRawBufferPointer, inout Int) -> Int32
  ) throws(ForsettiError) -> [UInt8]? {
    var capacity = min(initialCapacity, limit)
    for _ in 0..<4 {
      var buffer = [UInt8](repeating: 0, count: capacity)
      var length = 0
      let status = buffer.withUnsafeMutableBytes { attempt($0, &length) }
      switch status {
      case FORSETTI_OK:
        // A length beyond the buffer would be a broken host; never read past what we own.
        guard length >= 0, length <= capacity else { throw .io }
        buffer.removeSubrange(length...)
        return buffer
      case FORSETTI_ERR_NOT_FOUND: return nil
      case FORSETTI_ERR_BUFFER_TOO_SMALL:
        guard length <= limit else { throw .tooLarge }
        capacity = max(length, capacity)
      default: throw ForsettiError(status)
      }
    }
    throw .io
  }
}

/// C strings read from the host, which promises UTF-8; invalid bytes are repaired, not trusted.
enum HostText {
  static func string(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }

  static func bytes(_ p: UnsafeRawPointer?, _ count: Int) -> [UInt8] {
    guard let p, count > 0 else { return [] }
    return Array(UnsafeRawBufferPointer(start: p, count: count))
  }
}
