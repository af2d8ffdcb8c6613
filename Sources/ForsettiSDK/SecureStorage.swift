import CForsetti

/// forsetti/services/secure_storage.h: secrets the host seals at rest with a key the module
/// never sees, so a copied or altered sandbox gives up nothing.
public struct SecureStorage: @unchecked Sendable {
  // @unchecked: the table is the host's, immutable until stop, and every function thread-safe.
  let raw: UnsafePointer<forsetti_secure_storage>

  /// The most one value may hold, from the header, so a caller can check before it seals.
  public static let maxValue = Int(FORSETTI_SECURE_STORAGE_MAX_VALUE)

  /// Seals `value` under `key`, replacing any; `.quota` leaves the old value in place.
  public func set(_ key: String, _ value: [UInt8]) throws(ForsettiError) {
    guard let set = raw.pointee.set else { throw .unavailable }
    try ForsettiError.check(
      value.withUnsafeBytes { b in key.withCString { set($0, b.baseAddress, b.count) } })
  }

  /// Seals the UTF-8 of `string`, for the usual case of a token or password.
  public func set(_ key: String, string: String) throws(ForsettiError) { try set(key, Array(string.utf8)) }

  /// The opened value, nil when absent; `.invalidData` when what is stored does not authenticate.
  public func get(_ key: String) throws(ForsettiError) -> [UInt8]? {
    guard let get = raw.pointee.get else { throw .unavailable }
    return try GrowingRead.read(initialCapacity: 256, limit: Self.maxValue) { buffer, length in
      key.withCString { get($0, buffer.baseAddress, buffer.count, &length) }
    }
  }

  /// The value as UTF-8 text (invalid bytes repaired), nil when absent.
  public func string(_ key: String) throws(ForsettiError) -> String? {
    try get(key).map { String(decoding: $0, as: UTF8.self) }
  }

  /// Removes `key`; `.notFound` when there is none, so a caller can tell.
  public func remove(_ key: String) throws(ForsettiError) {
    guard let remove = raw.pointee.remove else { throw .unavailable }
    try ForsettiError.check(key.withCString { remove($0) })
  }
}
