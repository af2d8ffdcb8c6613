import CForsettiSys
import Glibc

/// The host–worker protocol: one SOCK_SEQPACKET message per frame, so frames never split or
/// merge. A frame is `kind: u32, id: u64` and then values, each an 8-byte integer or a
/// length-prefixed byte string. Both ends treat incoming frames as untrusted: every read is
/// bounds-checked and a malformed frame is an error, never a crash. Which frame may come when,
/// and what each carries: the table at the top of
/// `Sources/ForsettiRuntime/Isolation/WorkerProtocol.swift`; the version both sides check:
/// `ProtocolVersion`.
public enum WireKind: UInt32, Sendable {
  // host → worker
  case start = 1
  case stop = 2
  case deliverEvent = 3
  case deliverMessage = 4
  case response = 5
  /// Hot reload: hand over your state (answered by `stateSaved`).
  case saveState = 6
  /// To a worker started ahead of need (`--await-config`): the module it is for and the
  /// protocol version the host speaks (`WorkerConfiguration`). The first frame such a worker
  /// reads, and only then.
  case configure = 7
  /// On the serve ring (`CallRing.serves`), to a worker whose module serves a role: one call of
  /// another module (`RoleCall`), answered by `response(status, length, bytes)`.
  case serveCall = 8
  /// A role channel's descriptor attached: to a provider's worker, the end one consumer's
  /// calls arrive on, labelled with that consumer's module ID (the host's binding); to the
  /// consumer's worker, the end it calls its provider on, labelled with the role.
  case roleChannel = 9
  /// After a `startResult` of FORSETTI_OK, under a fresh unguessable `id`: answered by
  /// `startConfirmed` from the worker's main thread, which reads its commands again only once
  /// the module's `start` has returned. Until then the start deadline stays armed, so a frame a
  /// module's thread forges gets it no more time than returning would.
  case confirmStart = 10
  // 11 was `probe` (worker protocol 4 and before): hung is now judged by the progress the
  // host sees on the lanes (`RoleChannels`), never by a probe queued behind calls.
  // worker → host
  case confined = 100
  case loaded = 101
  case loadFailed = 102
  case startResult = 103
  case stopped = 104
  case log = 105
  case telemetry = 106
  case publish = 107
  case subscribe = 108
  case unsubscribe = 109
  case send = 110
  case setHandler = 111
  case stateSaved = 112
  /// On the call ring: one call of a service beyond the first four (`ServiceRequest`),
  /// answered by `response(status, length, bytes)` (`ServiceReply`).
  case service = 113
  /// The answer to `confirmStart`, under its `id`.
  case startConfirmed = 114
}

/// One frame.
public struct WireFrame: Sendable {
  public var kind: WireKind
  /// Request ID: pairs a `response` with its request; 0 for frames that need no answer.
  public var id: UInt64
  /// At most `WireView.maxValues` (6): a frame with more is refused when read.
  public var values: [WireValue]

  public init(_ kind: WireKind, id: UInt64 = 0, _ values: [WireValue] = []) {
    self.kind = kind
    self.id = id
    self.values = values
  }

  public func int(_ i: Int) -> Int64? {
    guard i < values.count, case .int(let v) = values[i] else { return nil }
    return v
  }

  public func bytes(_ i: Int) -> [UInt8]? {
    guard i < values.count, case .bytes(let b) = values[i] else { return nil }
    return b
  }

  /// A string value, if present and valid UTF-8.
  public func string(_ i: Int) -> String? { bytes(i).flatMap(Wire.text) }
}

public enum WireValue: Sendable, Hashable {
  case int(Int64)
  case bytes([UInt8])

  public static func string(_ s: String) -> WireValue { .bytes(Array(s.utf8)) }
}

/// Encoding, decoding and the socket itself.
public enum Wire {
  /// Largest frame either side sends or accepts (payloads are limited to 64 KiB).
  public static let maxFrame = 128 * 1024

  /// The frame's bytes, written by the same `WireWriter` the call path writes with.
  public static func encode(_ f: WireFrame) -> [UInt8] {
    var size = 12
    for v in f.values {
      switch v {
      case .int: size += 9
      case .bytes(let b): size += 5 + b.count
      }
    }
    return [UInt8](unsafeUninitializedCapacity: size) { out, count in
      var w = WireWriter(into: UnsafeMutableRawBufferPointer(out), kind: f.kind, id: f.id)
      for v in f.values {
        switch v {
        case .int(let i): w.int(i)
        case .bytes(let b): b.withUnsafeBytes { w.bytes($0) }
        }
      }
      count = w.length ?? 0
    }
  }

  /// `bytes` as a string if they are valid UTF-8. ASCII (every event type and module ID in
  /// practice) needs no validation.
  static func text<C: Collection<UInt8>>(_ bytes: C) -> String? {
    if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
    return String(validating: bytes, as: UTF8.self)
  }

  public enum DecodeError: Error, Sendable { case short, unknownKind(UInt32), badTag(UInt8), tooManyValues }

  /// The frame in `b`, its values copied out: checked by the same `WireView` the call path
  /// reads with, so there is one reader of untrusted frames.
  public static func decode(_ b: UnsafeRawBufferPointer) throws(DecodeError) -> WireFrame {
    let view = try WireView(b)
    var values: [WireValue] = []
    values.reserveCapacity(view.count)
    for i in 0..<view.count {
      if let n = view.int(i) {
        values.append(.int(n))
      } else if let bytes = view.bytes(i) {
        values.append(.bytes(Array(bytes)))
      }
    }
    return WireFrame(view.kind, id: view.id, values)
  }
}

/// One end of a SOCK_SEQPACKET socketpair. Sends are serialised by the kernel per message, so
/// several threads may send at once; one thread receives.
public struct WireSocket: Sendable {
  public let fd: Int32

  public init(fd: Int32) { self.fd = fd }

  /// A connected pair; both ends close on exec unless passed on deliberately.
  public static func pair() -> (WireSocket, WireSocket)? {
    var fds: [Int32] = [0, 0]
    guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0
    else {
      return nil
    }
    return (WireSocket(fd: fds[0]), WireSocket(fd: fds[1]))
  }

  @discardableResult
  public func send(_ f: WireFrame) -> Bool {
    let bytes = Wire.encode(f)
    guard bytes.count <= Wire.maxFrame else { return false }
    while true {
      let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      if n >= 0 { return true }
      if errno != EINTR { return false }
    }
  }

  public enum ReceiveResult: Sendable {
    case frame(WireFrame)
    /// The peer closed its end (or died).
    case closed
    /// The peer sent bytes that are not a frame.
    case malformed(String)
  }

  /// Sends `f` with the descriptor `fd` attached (the receiver gets its own copy).
  @discardableResult
  public func send(_ f: WireFrame, attaching fd: Int32) -> Bool {
    let bytes = Wire.encode(f)
    guard bytes.count <= Wire.maxFrame else { return false }
    return bytes.withUnsafeBytes { forsetti_send_with_fd(self.fd, $0.baseAddress, $0.count, fd) } >= 0
  }

  /// Blocks for the next frame and the descriptor that came with it (-1 when none; the caller
  /// owns it and must close it if it does not keep it).
  public func receive(into buffer: UnsafeMutableRawBufferPointer, descriptor: inout Int32) -> ReceiveResult {
    while true {
      var fd: Int32 = -1
      let n = forsetti_recv_with_fd(self.fd, buffer.baseAddress, buffer.count, &fd)
      descriptor = fd
      if n < 0 {
        if errno == EINTR { continue }
        return .closed
      }
      if n == 0 { return .closed }
      if n > buffer.count { return .malformed("frame of \(n) bytes exceeds \(buffer.count)") }
      do { return .frame(try Wire.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))) } catch {
        return .malformed("\(error)")
      }
    }
  }

  /// Blocks for the next frame; a descriptor that came with it is closed.
  public func receive(into buffer: UnsafeMutableRawBufferPointer) -> ReceiveResult {
    var fd: Int32 = -1
    let result = receive(into: buffer, descriptor: &fd)
    if fd >= 0 { close(fd) }
    return result
  }
}
