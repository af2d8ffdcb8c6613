import CFFI
import CForsetti
import ForsettiBinary
import ForsettiCore
import Glibc

/// The host functions of forsetti.h, each made as a libffi closure over one `ModuleBinding`.
/// Every function checks revocation first and validates its arguments at the boundary.
package enum HostFunctions {
  package static let storageID = "forsetti.storage"
  package static let telemetryID = "forsetti.telemetry"
  package static let eventsID = "forsetti.events"
  package static let messagesID = "forsetti.messages"
  package static let secureStorageID = "forsetti.secure_storage"
  package static let fileExportID = "forsetti.file_export"
  package static let cryptoID = "forsetti.crypto_utilities"
  package static let diagnosticsID = "forsetti.diagnostics"
  /// A role service's ID is this and the role's name.
  package static let rolePrefix = "forsetti.role."

  /// What resolving a service needs: a capability, and for a role service the role.
  package struct Access: Sendable {
    package var capability: Capability?
    package var role: DefaultModuleRole?
  }

  /// What `id` needs, or nil for an unknown service: the one table of service IDs.
  package static func access(_ id: String) -> Access? {
    switch id {
    case storageID: return Access(capability: .storage)
    case telemetryID: return Access(capability: .telemetry)
    case eventsID, messagesID: return Access()
    case secureStorageID: return Access(capability: .secureStorage)
    case fileExportID: return Access(capability: .fileExport)
    case cryptoID: return Access(capability: .cryptoUtilities)
    case diagnosticsID: return Access(capability: .diagnostics)
    default:
      guard id.hasPrefix(rolePrefix),
        let role = DefaultModuleRole(rawValue: String(id.dropFirst(rolePrefix.count))),
        let capability = role.requiredCapability
      else { return nil }
      return Access(capability: capability, role: role)
    }
  }

  package static let maxName = Int(FORSETTI_MAX_NAME)
  package static let maxMessage = Int(FORSETTI_LOG_MAX_MESSAGE)
  /// Largest event payload.
  package static let maxPayload = Int(FORSETTI_EVENT_MAX_PAYLOAD)
  /// Largest message payload.
  package static let maxMessagePayload = Int(FORSETTI_MESSAGE_MAX_PAYLOAD)
  /// Longest telemetry event name, and attributes JSON.
  package static let maxTelemetryName = Int(FORSETTI_TELEMETRY_MAX_NAME)
  package static let maxTelemetryAttributes = Int(FORSETTI_TELEMETRY_MAX_ATTRIBUTES)

  package static func closure(
    _ args: [UnsafeMutablePointer<ffi_type>], _ ret: UnsafeMutablePointer<ffi_type>,
    _ handler: @escaping FFIClosure.Handler
  ) throws(BindingError) -> FFIClosure {
    do { return try FFIClosure(arguments: args, returns: ret, handler: handler) } catch {
      throw .closure("\(error)")
    }
  }

  /// Fills `log` and `resolve` of the host table.
  package static func install(on b: ModuleBinding, table: UnsafeMutablePointer<forsetti_host>)
    throws(BindingError)
  {
    let log = try closure([FFIType.int32, FFIType.pointer], FFIType.void) { a in
      guard !b.isRevoked, let p = a.cString(1) else { return .void }
      let level = LogLevel(rawValue: a.int32(0)) ?? .info
      let text = text(p, max: maxMessage) ?? "<message not UTF-8 or longer than \(maxMessage) bytes>"
      b.log(level, text)
      return .void
    }
    let resolve = try closure([FFIType.pointer], FFIType.pointer) { a in
      guard !b.isRevoked, let p = a.cString(0), let id = text(p, max: maxName) else {
        return .pointer(nil)
      }
      return .pointer(b.resolve(id))
    }
    table.pointee.log = log.function(as: (@convention(c) (Int32, UnsafePointer<CChar>?) -> Void).self)
    table.pointee.resolve = resolve.function(
      as: (@convention(c) (UnsafePointer<CChar>?) -> UnsafeRawPointer?).self)
  }

  /// Builds the table of a granted service, or nil for an unknown ID.
  package static func serviceTable(_ id: String, for b: ModuleBinding) throws(BindingError)
    -> UnsafeMutableRawPointer?
  {
    switch id {
    case storageID: return try storage(b)
    case telemetryID: return try telemetry(b)
    case eventsID: return try events(b)
    case messagesID: return try messages(b)
    case secureStorageID: return try secureStorage(b)
    case fileExportID: return try fileExport(b)
    case cryptoID: return try crypto(b)
    case diagnosticsID: return try diagnostics(b)
    default:
      guard let role = access(id)?.role else { return nil }
      return try roleService(b, role)
    }
  }

  package static func name(_ a: FFIArguments, _ i: Int) -> String? {
    guard let p = a.cString(i) else { return nil }
    return text(p, max: maxName)
  }

  /// The string at `p` if it is valid UTF-8 and at most `max` bytes: `CString.read`, without
  /// its generic validation, which looks up type metadata on every call (a quarter of a
  /// publish). The bytes are copied (to the stack, for names) before they are validated, so a
  /// module thread rewriting the string meanwhile cannot make the host read past `max`.
  package static func text(_ p: UnsafePointer<CChar>, max: Int) -> String? {
    let n = strnlen(p, max + 1)
    guard n <= max else { return nil }
    return withUnsafeTemporaryAllocation(of: CChar.self, capacity: n + 1) { copy in
      guard let base = copy.baseAddress else { return nil }
      base.initialize(from: p, count: n)
      base[n] = 0
      return String(validatingCString: base)
    }
  }

  /// Buffers larger than any host limit; such a length is refused before it is used.
  package static let maxBuffer = Int(FORSETTI_STORAGE_MAX_VALUE)

  /// The (pointer, length) pair as a buffer; nil when NULL with a length, or absurdly long.
  package static func buffer(_ a: FFIArguments, _ i: Int, _ n: Int) -> UnsafeRawBufferPointer? {
    let length = a.size(n)
    guard length > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
    guard length <= maxBuffer, let p = a.pointer(i) else { return nil }
    return UnsafeRawBufferPointer(start: p, count: length)
  }

  package static var revoked: FFIReturn { .int32(FORSETTI_ERR_REVOKED) }
  package static var invalid: FFIReturn { .int32(FORSETTI_ERR_INVALID_ARGUMENT) }

  package static func storage(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    guard let s = b.storage else { throw .sandbox("no sandbox") }
    let set = try closure([FFIType.pointer, FFIType.pointer, FFIType.size], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      guard let key = name(a, 0), let bytes = buffer(a, 1, 2) else { return invalid }
      return .int32(s.set(key, bytes))
    }
    let get = try closure([FFIType.pointer, FFIType.pointer, FFIType.size, FFIType.pointer], FFIType.int32) {
      a in
      guard !b.isRevoked else { return revoked }
      guard let key = name(a, 0), let lengthOut = a.pointer(3) else { return invalid }
      // Nothing stored is larger than the value limit, so a larger capacity is never needed.
      let capacity = min(a.size(2), maxBuffer)
      guard capacity == 0 || a.pointer(1) != nil else { return invalid }
      var length = 0
      let status = s.get(
        key, into: UnsafeMutableRawBufferPointer(start: a.pointer(1), count: capacity), length: &length)
      lengthOut.storeBytes(of: length, as: Int.self)
      return .int32(status)
    }
    let remove = try closure([FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      guard let key = name(a, 0) else { return invalid }
      return .int32(s.remove(key))
    }
    let open = try closure([FFIType.pointer, FFIType.uint32], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      guard let p = a.cString(0), let path = text(p, max: 4096) else { return invalid }
      let fd = s.openFile(path, flags: a.uint32(1))
      if fd == FORSETTI_ERR_DENIED {
        b.warn("storage: refused to open \"\(path)\": it is not beneath the sandbox", ["path": path])
      }
      return .int32(fd)
    }
    let mkdir = try closure([FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      guard let p = a.cString(0), let path = text(p, max: 4096) else { return invalid }
      return .int32(s.makeDirectory(path))
    }
    let t = UnsafeMutablePointer<forsetti_storage>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_storage(
        struct_size: UInt32(MemoryLayout<forsetti_storage>.size),
        set: set.function(as: (@convention(c) (UnsafePointer<CChar>?, UnsafeRawPointer?, Int) -> Int32).self),
        get: get.function(
          as: (@convention(c) (
            UnsafePointer<CChar>?, UnsafeMutableRawPointer?, Int, UnsafeMutablePointer<Int>?
          ) -> Int32)
          .self),
        remove: remove.function(as: (@convention(c) (UnsafePointer<CChar>?) -> Int32).self),
        open_file: open.function(as: (@convention(c) (UnsafePointer<CChar>?, UInt32) -> Int32).self),
        make_directory: mkdir.function(as: (@convention(c) (UnsafePointer<CChar>?) -> Int32).self)))
    return UnsafeMutableRawPointer(t)
  }

  package static func telemetry(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    let record = try closure([FFIType.pointer, FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      guard let event = name(a, 0), !event.isEmpty, event.utf8.count <= maxTelemetryName else {
        return invalid
      }
      var attributes: JSONValue?
      if let p = a.cString(1) {
        guard let text = text(p, max: maxTelemetryAttributes), let value = try? JSONParser.parse(text),
          value.objectValue != nil
        else { return invalid }
        attributes = value
      }
      guard b.backend.telemetry(moduleID: b.moduleID, name: event, attributes: attributes) else {
        return .int32(FORSETTI_ERR_IO)
      }
      return .int32(FORSETTI_OK)
    }
    let t = UnsafeMutablePointer<forsetti_telemetry>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_telemetry(
        struct_size: UInt32(MemoryLayout<forsetti_telemetry>.size),
        record: record.function(
          as: (@convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32).self)))
    return UnsafeMutableRawPointer(t)
  }

  package static func events(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    let backend = b.backend
    let publish = try closure([FFIType.pointer, FFIType.pointer, FFIType.size], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      guard b.identityIntact() else { return .int32(FORSETTI_ERR_DENIED) }
      guard let type = name(a, 0), let payload = buffer(a, 1, 2) else { return invalid }
      guard payload.count <= HostFunctions.maxPayload else { return .int32(FORSETTI_ERR_TOO_LARGE) }
      return .int32(backend.publish(from: b.moduleID, type: type, payload: payload))
    }
    let subscribe = try closure([FFIType.pointer, FFIType.pointer, FFIType.pointer], FFIType.int64) { a in
      guard !b.isRevoked else { return .int64(Int64(FORSETTI_ERR_REVOKED)) }
      guard let type = name(a, 0), !type.isEmpty, let fn = a.pointer(1) else {
        return .int64(Int64(FORSETTI_ERR_INVALID_ARGUMENT))
      }
      let handler = unsafeBitCast(fn, to: forsetti_event_handler.self)
      return .int64(
        backend.subscribe(
          moduleID: b.moduleID, type: type, handler: ModuleCallback(function: handler, context: a.pointer(2)))
      )
    }
    let end = backend.unsubscriber(moduleID: b.moduleID)
    let unsubscribe = try closure([FFIType.int64], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      return .int32(end(a.int64(0)))
    }
    typealias Handler = forsetti_event_handler
    let t = UnsafeMutablePointer<forsetti_events>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_events(
        struct_size: UInt32(MemoryLayout<forsetti_events>.size),
        publish: publish.function(
          as: (@convention(c) (UnsafePointer<CChar>?, UnsafeRawPointer?, Int) -> Int32).self),
        subscribe: subscribe.function(
          as: (@convention(c) (UnsafePointer<CChar>?, Handler?, UnsafeMutableRawPointer?) -> Int64).self),
        unsubscribe: unsubscribe.function(as: (@convention(c) (Int64) -> Int32).self)))
    return UnsafeMutableRawPointer(t)
  }

  package static func messages(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    let backend = b.backend
    let send = try closure([FFIType.pointer, FFIType.pointer, FFIType.pointer, FFIType.size], FFIType.int32) {
      a in
      guard !b.isRevoked else { return revoked }
      guard b.identityIntact() else { return .int32(FORSETTI_ERR_DENIED) }
      guard let target = name(a, 0), let type = name(a, 1), let payload = buffer(a, 2, 3) else {
        return invalid
      }
      guard payload.count <= HostFunctions.maxMessagePayload else { return .int32(FORSETTI_ERR_TOO_LARGE) }
      return .int32(backend.send(from: b.moduleID, to: target, type: type, payload: payload))
    }
    let setHandler = try closure([FFIType.pointer, FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      let callback = a.pointer(0).map {
        ModuleCallback(function: unsafeBitCast($0, to: forsetti_message_handler.self), context: a.pointer(1))
      }
      return .int32(backend.setHandler(moduleID: b.moduleID, handler: callback))
    }
    typealias Handler = forsetti_message_handler
    let t = UnsafeMutablePointer<forsetti_messages>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_messages(
        struct_size: UInt32(MemoryLayout<forsetti_messages>.size),
        send: send.function(
          as: (@convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafeRawPointer?, Int) -> Int32)
            .self),
        set_handler: setHandler.function(
          as: (@convention(c) (Handler?, UnsafeMutableRawPointer?) -> Int32).self)))
    return UnsafeMutableRawPointer(t)
  }
}
