import CForsetti

/// The host as the module sees it: logging and capability-scoped services. Every function is
/// bound to this module by the host; after `stop` they return `.revoked`.
public struct Host: @unchecked Sendable {
  // @unchecked: the host table is immutable while the module runs and forsetti.h declares
  // every host function thread-safe.
  let raw: UnsafePointer<forsetti_host>
  let box: ModuleBoxBase

  /// The module's own ID as the host bound it, which every call acts as.
  public var moduleID: String { String(cString: raw.pointee.module_id) }
  /// The only directory the module may write (in a worker, the kernel enforces it).
  public var sandboxPath: String { String(cString: raw.pointee.sandbox_path) }

  /// Log levels of forsetti/host.h, so a line cannot carry one the host does not know.
  public enum Level: Int32, Sendable {
    /// Detail for the module's author, not the operator.
    case debug = 0
    /// What the module did.
    case info = 1
    /// Something the operator may want to look at.
    case warning = 2
    /// Something failed.
    case error = 3
  }

  /// Writes one line to the host log; the host stamps the module ID.
  public func log(_ message: String, level: Level = .info) {
    message.withCString { raw.pointee.log(level.rawValue, $0) }
  }

  func resolve(_ id: String) -> UnsafeRawPointer? { id.withCString { raw.pointee.resolve($0) } }

  /// Key-value storage and sandboxed files; nil without the `storage` capability.
  public var storage: Storage? {
    resolve(FORSETTI_SERVICE_STORAGE).map { Storage(raw: $0.assumingMemoryBound(to: forsetti_storage.self)) }
  }

  /// Telemetry; nil without the `telemetry` capability.
  public var telemetry: Telemetry? {
    resolve(FORSETTI_SERVICE_TELEMETRY).map {
      Telemetry(raw: $0.assumingMemoryBound(to: forsetti_telemetry.self))
    }
  }

  /// The event bus.
  public var events: Events? {
    resolve(FORSETTI_SERVICE_EVENTS).map {
      Events(raw: $0.assumingMemoryBound(to: forsetti_events.self), box: box)
    }
  }

  /// Direct messages to other modules.
  public var messages: Messages? {
    resolve(FORSETTI_SERVICE_MESSAGES).map {
      Messages(raw: $0.assumingMemoryBound(to: forsetti_messages.self), box: box)
    }
  }

  /// Secrets sealed at rest; nil without the `secure_storage` capability.
  public var secureStorage: SecureStorage? {
    resolve(FORSETTI_SERVICE_SECURE_STORAGE).map {
      SecureStorage(raw: $0.assumingMemoryBound(to: forsetti_secure_storage.self))
    }
  }

  /// Files out to the operator's export directory; nil without the `file_export` capability.
  public var fileExport: FileExport? {
    resolve(FORSETTI_SERVICE_FILE_EXPORT).map {
      FileExport(raw: $0.assumingMemoryBound(to: forsetti_file_export.self))
    }
  }

  /// Hashing, randomness, sealing and signing; nil without the `crypto_utilities` capability.
  public var crypto: Crypto? {
    resolve(FORSETTI_SERVICE_CRYPTO).map { Crypto(raw: $0.assumingMemoryBound(to: forsetti_crypto.self)) }
  }

  /// The module's own health report; nil without the `diagnostics` capability.
  public var diagnostics: Diagnostics? {
    resolve(FORSETTI_SERVICE_DIAGNOSTICS).map {
      Diagnostics(raw: $0.assumingMemoryBound(to: forsetti_diagnostics.self))
    }
  }

  /// The application's service `id` (e.g. `com.example.weather.v1`); nil when the application
  /// embedding the host offers none by that ID, or the module lacks its capability (the host logs which).
  public func applicationService(_ id: String) -> ApplicationService? {
    resolve(id).map { ApplicationService(raw: $0.assumingMemoryBound(to: forsetti_application_service.self)) }
  }

  /// A default role's service, to serve it (its holder) or call it (a consumer); nil without
  /// the role's capability or when the module neither holds nor consumes it (the host logs which).
  public func role(_ role: Role) -> RoleService? {
    resolve(role.serviceID).map {
      RoleService(raw: $0.assumingMemoryBound(to: forsetti_role_service.self), box: box)
    }
  }
}

/// forsetti/services/storage.h.
public struct Storage: @unchecked Sendable {
  // @unchecked: as Host.
  let raw: UnsafePointer<forsetti_storage>

  /// Stores `bytes` under `key`, atomically: a crash leaves the old value or the new one.
  public func set(_ key: String, _ bytes: [UInt8]) throws(ForsettiError) {
    try ForsettiError.check(
      bytes.withUnsafeBytes { b in key.withCString { raw.pointee.set($0, b.baseAddress, b.count) } })
  }

  /// Stores the UTF-8 of `string`, for the usual small text value.
  public func set(_ key: String, string: String) throws(ForsettiError) { try set(key, Array(string.utf8)) }

  /// The value of `key`, or nil when absent.
  public func get(_ key: String) throws(ForsettiError) -> [UInt8]? {
    guard let get = raw.pointee.get else { throw .unavailable }
    return try GrowingRead.read(initialCapacity: 256, limit: Int(FORSETTI_STORAGE_MAX_VALUE)) { b, length in
      key.withCString { get($0, b.baseAddress, b.count, &length) }
    }
  }

  /// The value as UTF-8 text (invalid bytes repaired), nil when absent.
  public func string(_ key: String) throws(ForsettiError) -> String? {
    try get(key).map { String(decoding: $0, as: UTF8.self) }
  }

  /// Removes `key`; `.notFound` when there is none, so a caller can tell.
  public func remove(_ key: String) throws(ForsettiError) {
    try ForsettiError.check(key.withCString { raw.pointee.remove($0) })
  }

  /// Opens a file beneath the sandbox; the caller owns and closes the descriptor.
  public func openFile(_ path: String, flags: UInt32) throws(ForsettiError) -> Int32 {
    let fd = path.withCString { raw.pointee.open_file($0, flags) }
    if fd < 0 { throw ForsettiError(fd) }
    return fd
  }

  /// The FORSETTI_OPEN_* flags as a set, so a call cannot pass a bit the host does not know.
  public struct OpenOptions: OptionSet, Sendable {
    /// The flag bits as forsetti/services/storage.h defines them.
    public let rawValue: UInt32
    /// Wraps FORSETTI_OPEN_* bits, for flags from C code.
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Read access.
    public static let read = OpenOptions(rawValue: FORSETTI_OPEN_READ)
    /// Write access.
    public static let write = OpenOptions(rawValue: FORSETTI_OPEN_WRITE)
    /// Create when absent (needs write).
    public static let create = OpenOptions(rawValue: FORSETTI_OPEN_CREATE)
    /// Empty an existing file (needs write).
    public static let truncate = OpenOptions(rawValue: FORSETTI_OPEN_TRUNCATE)
    /// Write at the end.
    public static let append = OpenOptions(rawValue: FORSETTI_OPEN_APPEND)
  }

  /// Opens a file beneath the sandbox with typed options; the caller owns and closes the descriptor.
  public func openFile(_ path: String, _ options: OpenOptions) throws(ForsettiError) -> Int32 {
    try openFile(path, flags: options.rawValue)
  }

  /// Creates a directory beneath the sandbox (parents must exist), since `openFile` makes none;
  /// an existing directory is success.
  public func makeDirectory(_ path: String) throws(ForsettiError) {
    guard let makeDirectory = raw.pointee.make_directory else { throw .unavailable }
    try ForsettiError.check(path.withCString { makeDirectory($0) })
  }
}

/// forsetti/services/telemetry.h.
public struct Telemetry: @unchecked Sendable {
  // @unchecked: as Host.
  let raw: UnsafePointer<forsetti_telemetry>

  /// Records `name` with attributes given as a JSON object text (or nil).
  public func record(_ name: String, attributesJSON: String? = nil) throws(ForsettiError) {
    let s = name.withCString { n in
      if let a = attributesJSON { return a.withCString { raw.pointee.record(n, $0) } }
      return raw.pointee.record(n, nil)
    }
    try ForsettiError.check(s)
  }
}

/// An event or message as delivered to a Swift handler.
public struct Delivery: Sendable {
  /// The sending module as the host bound it, never what the sender claims.
  public var source: String
  /// The event or message type.
  public var type: String
  /// The bytes, copied out of the host's borrowed buffer.
  public var payload: [UInt8]
  /// The payload as UTF-8 text (invalid bytes repaired), for text protocols.
  public var text: String { String(decoding: payload, as: UTF8.self) }
}

/// forsetti/services/events.h.
public struct Events: @unchecked Sendable {
  // @unchecked: as Host.
  let raw: UnsafePointer<forsetti_events>
  let box: ModuleBoxBase

  /// Publishes as this module to every subscriber of `type`; payloads at most 64 KiB.
  public func publish(_ type: String, _ payload: [UInt8] = []) throws(ForsettiError) {
    try ForsettiError.check(
      payload.withUnsafeBytes { b in type.withCString { raw.pointee.publish($0, b.baseAddress, b.count) } })
  }

  /// Publishes the UTF-8 of `text`.
  public func publish(_ type: String, text: String) throws(ForsettiError) {
    try publish(type, Array(text.utf8))
  }

  /// Subscribes `handler` (called on the publisher's thread) to `type`, or "*" for all.
  @discardableResult
  public func subscribe(_ type: String, _ handler: @escaping @Sendable (Delivery) -> Void)
    throws(ForsettiError) -> Int64
  {
    let context = box.retain(HandlerBox(handler))
    let id = type.withCString { raw.pointee.subscribe($0, deliverEvent, context) }
    if id < 0 { throw ForsettiError(Int32(truncatingIfNeeded: id)) }
    return id
  }

  /// Ends a subscription this module made; `.notFound` for any other ID.
  public func unsubscribe(_ id: Int64) throws(ForsettiError) {
    try ForsettiError.check(raw.pointee.unsubscribe(id))
  }
}

/// forsetti/services/messages.h.
public struct Messages: @unchecked Sendable {
  // @unchecked: as Host.
  let raw: UnsafePointer<forsetti_messages>
  let box: ModuleBoxBase

  /// Sends as this module; `.notFound` when the target is not running or has no handler.
  public func send(to target: String, _ type: String, _ payload: [UInt8] = []) throws(ForsettiError) {
    let s = payload.withUnsafeBytes { b in
      target.withCString { t in type.withCString { raw.pointee.send(t, $0, b.baseAddress, b.count) } }
    }
    try ForsettiError.check(s)
  }

  /// Installs this module's message handler (replacing any earlier one).
  public func onMessage(_ handler: @escaping @Sendable (Delivery) -> Void) throws(ForsettiError) {
    let context = box.retain(HandlerBox(handler))
    try ForsettiError.check(raw.pointee.set_handler(deliverMessage, context))
  }

  /// Removes the message handler, so senders get `.notFound` instead of a module that ignores them.
  public func removeHandler() throws(ForsettiError) {
    try ForsettiError.check(raw.pointee.set_handler(nil, nil))
  }
}

final class HandlerBox: Sendable {
  let handler: @Sendable (Delivery) -> Void
  init(_ h: @escaping @Sendable (Delivery) -> Void) { handler = h }
}

private func delivery(
  _ context: UnsafeMutableRawPointer?, _ source: UnsafePointer<CChar>?, _ type: UnsafePointer<CChar>?,
  _ payload: UnsafeRawPointer?, _ length: Int
) {
  guard let context, let source, let type else { return }
  let bytes = payload.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
  let box = Unmanaged<HandlerBox>.fromOpaque(context).takeUnretainedValue()
  box.handler(Delivery(source: String(cString: source), type: String(cString: type), payload: bytes))
}

private let deliverEvent: forsetti_event_handler = { c, s, t, p, n in delivery(c, s, t, p, n) }
private let deliverMessage: forsetti_message_handler = { c, s, t, p, n in delivery(c, s, t, p, n) }
