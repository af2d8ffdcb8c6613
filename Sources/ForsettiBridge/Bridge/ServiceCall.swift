import CForsetti
import ForsettiCore

/// The services of ABI 1.1 (secure storage, file export, crypto, diagnostics, roles) reach the
/// host through one request shape, in-process and from a worker alike: the bound C function
/// turns its arguments into a `ServiceRequest`, the host answers with a `ServiceReply`. From a
/// worker the request crosses the call ring as one `service` frame, so the host checks
/// everything on its side, with the grant it holds (`ModuleCaller`), never the worker's claim.
package enum ServiceOperation: Int64, Sendable, CaseIterable {
  case secureSet = 1, secureGet, secureRemove
  case exportWrite = 10
  case cryptoRandom = 20, cryptoHash, cryptoSeal, cryptoOpen, cryptoSign, cryptoVerify, cryptoPublicKey
  case diagnosticsReport = 30, diagnosticsCounter
  /// A call of a role's provider: `number` is the role's index in `DefaultModuleRole.allCases`,
  /// arguments are the method and the request.
  case roleCall = 40
  /// The worker's module installed the handler of the role it holds, to run `number` calls at
  /// once (1…FORSETTI_ROLE_MAX_CONCURRENCY), or removed it (0).
  case roleServe
  /// From a worker: give me a channel to the provider of the role `number` names (no call is
  /// made). FORSETTI_OK once the channel was sent on the socket (or one is open already);
  /// FORSETTI_ERR_NOT_FOUND when the provider runs in the host (relay the call: `roleCall`);
  /// otherwise the status the call would get (UNAVAILABLE, DENIED).
  case roleConnect
  /// From a worker: a call on the channel to the provider of the role `number` names was not
  /// answered by its deadline. A claim: the host looks at the provider's progress itself
  /// (`RoleChannels.suspect`).
  case roleStalled
  /// From a worker: its call on lane argument 0 of its channel to the provider of the role
  /// `number` names waits for a handler. FORSETTI_ERR_CALL_CYCLE when the host withdrew it
  /// (it would close a cycle of waiting modules), else FORSETTI_OK.
  case roleWaiting
  /// A call of a service the embedding application offers (forsetti/services/application.h):
  /// arguments the service's ID, the method and the request.
  case applicationCall = 50
  /// Whether the application offers the service argument 0 names to the caller: FORSETTI_OK,
  /// FORSETTI_ERR_DENIED (its capability was not granted; the bytes name it) or
  /// FORSETTI_ERR_NOT_FOUND. Asked of the host, so a worker needs no list of its own.
  case applicationResolve

  /// The capability the operation needs; the role operations need the role's own (checked
  /// with the role, `RoleRules`).
  package var capability: Capability? {
    switch self {
    case .secureSet, .secureGet, .secureRemove: .secureStorage
    case .exportWrite: .fileExport
    case .cryptoRandom, .cryptoHash, .cryptoSeal, .cryptoOpen, .cryptoSign, .cryptoVerify, .cryptoPublicKey:
      .cryptoUtilities
    case .diagnosticsReport, .diagnosticsCounter: .diagnostics
    case .roleCall, .roleServe, .roleConnect, .roleStalled, .roleWaiting: nil
    // Each application service names its own, checked by the registry (`ApplicationServices`).
    case .applicationCall, .applicationResolve: nil
    }
  }
}

/// One service call: the operation, what the caller can take back, a number and up to three
/// byte strings (their meaning is the operation's).
package struct ServiceRequest: Sendable {
  package var operation: ServiceOperation
  /// Bytes of reply the caller has room for (never more than `ServiceReply.maxBytes`).
  package var capacity: Int
  package var number: Int64
  package var arguments: [[UInt8]]

  package static let maxArguments = 3

  package init(
    _ operation: ServiceOperation, capacity: Int = 0, number: Int64 = 0, _ arguments: [[UInt8]] = []
  ) {
    self.operation = operation
    self.capacity = max(0, min(capacity, ServiceReply.maxBytes))
    self.number = number
    self.arguments = Array(arguments.prefix(Self.maxArguments))
  }

  package func argument(_ i: Int) -> [UInt8]? { i < arguments.count ? arguments[i] : nil }

  /// The argument as text, if it is valid UTF-8 of at most `max` bytes.
  package func text(_ i: Int, max: Int = HostFunctions.maxName) -> String? {
    guard let b = argument(i), b.count <= max else { return nil }
    return String(validating: b, as: UTF8.self)
  }

  /// Writes the request as a `service` frame: operation, capacity, number, arguments.
  package func write(_ w: inout WireWriter) {
    w.int(operation.rawValue)
    w.int(Int64(capacity))
    w.int(number)
    for a in arguments { a.withUnsafeBytes { w.bytes($0) } }
  }

  /// The request a `service` frame carries; nil when it is not one (an unknown operation, a
  /// value missing or of the wrong type). The frame is untrusted: every value is checked here.
  package init?(_ f: WireView) {
    guard f.kind == .service, let op = f.int(0).flatMap(ServiceOperation.init(rawValue:)),
      let capacity = f.int(1), capacity >= 0, let number = f.int(2)
    else { return nil }
    var arguments: [[UInt8]] = []
    for i in 3..<f.count {
      guard let b = f.bytes(i) else { return nil }
      arguments.append(Array(b))
    }
    self.init(op, capacity: Int(clamping: capacity), number: number, arguments)
  }
}

/// The answer to a `ServiceRequest`: a status and the bytes of the reply. `length` is the
/// reply's size, or with FORSETTI_ERR_BUFFER_TOO_SMALL the size the caller needs.
package struct ServiceReply: Sendable, Equatable {
  package var status: Int32
  package var length: Int
  package var bytes: [UInt8]

  /// The largest reply the ABI can ask for: a role response, a secure value, or a sealed input
  /// with its overhead.
  package static let maxBytes = max(
    Int(FORSETTI_ROLE_MAX_PAYLOAD), Int(FORSETTI_SECURE_STORAGE_MAX_VALUE),
    Int(FORSETTI_CRYPTO_MAX_INPUT) + Int(FORSETTI_CRYPTO_SEAL_OVERHEAD))

  package init(_ status: Int32, _ bytes: [UInt8] = [], length: Int? = nil) {
    self.status = status
    self.bytes = bytes
    self.length = length ?? bytes.count
  }

  package static func status(_ s: Int32) -> ServiceReply { ServiceReply(s) }

  /// Writes the reply as a `response` frame: status, length, bytes.
  package func write(_ w: inout WireWriter) {
    w.int(Int64(status))
    w.int(Int64(length))
    bytes.withUnsafeBytes { w.bytes($0) }
  }

  /// The reply a `response` frame carries, or FORSETTI_ERR_IO for one that is not a reply.
  package init(_ f: WireView, capacity: Int) {
    guard let (status, length, bytes) = Self.check(f, capacity: capacity) else {
      self.init(FORSETTI_ERR_IO)
      return
    }
    self.init(status, Array(bytes), length: length)
  }

  /// The parts of a `response` frame answering a call with room for `capacity` bytes, in place;
  /// nil when it is no such answer. The frame comes from a worker (a provider's, or the host's
  /// to a worker): its length is believed only when it is the bytes' own, or, with
  /// FORSETTI_ERR_BUFFER_TOO_SMALL and no bytes, a size larger than the room and within what
  /// any reply may hold — never a length the caller could overrun its buffer by.
  package static func check(_ f: WireView, capacity: Int)
    -> (status: Int32, length: Int, bytes: UnsafeRawBufferPointer)?
  {
    guard f.kind == .response, let s = f.int(0), let status = Int32(exactly: s), let n = f.int(1),
      let b = f.bytes(2), b.count <= capacity
    else { return nil }
    if status == FORSETTI_ERR_BUFFER_TOO_SMALL, b.isEmpty {
      guard n > Int64(capacity), n <= Int64(maxBytes) else { return nil }
      return (status, Int(n), b)
    }
    guard n == Int64(b.count) else { return nil }
    return (status, b.count, b)
  }

  /// Copies the reply into the caller's buffer and length; the status to return.
  package func deliver(
    into buffer: UnsafeMutableRawPointer?, capacity: Int, length: UnsafeMutablePointer<Int>?
  )
    -> Int32
  {
    length?.pointee = self.length
    guard !bytes.isEmpty else { return status }
    guard bytes.count <= capacity, let buffer else { return FORSETTI_ERR_IO }
    bytes.withUnsafeBytes { src in
      if let from = src.baseAddress { buffer.copyMemory(from: from, byteCount: src.count) }
    }
    return status
  }
}

/// Who makes a call, as the host bound it: the module and what it was granted. The host side
/// uses its own copy (the binding's, or the one it gave the worker), never one a worker sends.
package struct ModuleCaller: Sendable, Hashable {
  package var moduleID: String
  package var granted: Set<Capability>
  /// The role the module holds (its `defaultModuleRole`), which it may serve.
  package var serves: DefaultModuleRole?
  /// The roles it lists in `requiredDefaultRoles`, which it may call.
  package var calls: Set<DefaultModuleRole>

  package init(
    moduleID: String, granted: Set<Capability>, serves: DefaultModuleRole? = nil,
    calls: Set<DefaultModuleRole> = []
  ) {
    self.moduleID = moduleID
    self.granted = granted
    self.serves = serves
    self.calls = calls
  }
}
