import CForsetti
import Synchronization
import Testing

@testable import ForsettiSDK

/// The SDK's own logic against host tables faked in Swift: the C side of a role handler, buffer
/// sizes it chooses, and what it refuses before any host function runs. The real host's side is
/// Tests/ForsettiCLITests/ToolboxExampleTests.swift.
@Suite(.serialized) struct FakeHostTests {
  /// What the fake tables saw; C function pointers cannot capture, so they report here.
  struct Seen: @unchecked Sendable {
    // @unchecked: the handler and context are plain C values, only touched under the Mutex.
    var handler: forsetti_role_handler?
    var context: UnsafeMutableRawPointer?
    var calls = 0
    var mode = 0
  }
  static let seen = Mutex(Seen())
  /// Holds the handlers the SDK hands to C, as the module's box does for the life of the image.
  static let box = ModuleBoxBase()

  static func reset(mode: Int = 0) { seen.withLock { $0 = Seen(mode: mode) } }

  // MARK: A role's provider

  /// Serves `handler` on a fake table and returns the C function the SDK installed.
  func installed(
    _ handler: @escaping @Sendable (RoleCall) throws(ForsettiError) -> [UInt8]
  ) throws -> (forsetti_role_handler, UnsafeMutableRawPointer?) {
    Self.reset()
    var table = forsetti_role_service(
      struct_size: UInt32(MemoryLayout<forsetti_role_service>.size), call: nil,
      serve: { h, c in
        FakeHostTests.seen.withLock {
          $0.handler = h
          $0.context = c
        }
        return FORSETTI_OK
      }, serve_concurrently: nil, call_within: nil, time_left_ns: nil)
    try withUnsafePointer(to: &table) { try RoleService(raw: $0, box: Self.box).serve(handler) }
    let s = Self.seen.withLock { $0 }
    return (try #require(s.handler), s.context)
  }

  /// Calls the installed C handler as the host would, into a buffer of `capacity` bytes of 0xAA.
  func answer(
    _ h: (forsetti_role_handler, UnsafeMutableRawPointer?), _ method: String, _ request: [UInt8],
    capacity: Int
  ) -> (status: Int32, length: Int, buffer: [UInt8]) {
    var out = [UInt8](repeating: 0xAA, count: capacity)
    var length = -1
    let status = "com.test.caller".withCString { caller in
      method.withCString { m in
        request.withUnsafeBytes { r in
          out.withUnsafeMutableBytes { o in
            h.0(h.1, caller, m, r.baseAddress, r.count, o.baseAddress, o.count, &length)
          }
        }
      }
    }
    return (status, length, out)
  }

  @Test func aHandlersAnswerIsWrittenOnlyWhenItFitsAndItsErrorIsItsStatus() throws {
    let h = try installed { call throws(ForsettiError) in
      guard call.method == "echo" else { throw .notFound }
      return Array("\(call.caller):".utf8) + call.request
    }
    let expected = Array("com.test.caller:abc".utf8)

    let fits = answer(h, "echo", Array("abc".utf8), capacity: 64)
    #expect(fits.status == FORSETTI_OK)
    #expect(fits.length == expected.count)
    #expect(Array(fits.buffer.prefix(fits.length)) == expected)
    #expect(fits.buffer.dropFirst(expected.count).allSatisfy { $0 == 0xAA }, "wrote past the answer")

    // Too small: the size needed, and not one byte written.
    let small = answer(h, "echo", Array("abc".utf8), capacity: 4)
    #expect(small.status == FORSETTI_ERR_BUFFER_TOO_SMALL)
    #expect(small.length == expected.count)
    #expect(small.buffer == [0xAA, 0xAA, 0xAA, 0xAA])

    let refused = answer(h, "nope", [], capacity: 64)
    #expect(refused.status == FORSETTI_ERR_NOT_FOUND)
    #expect(refused.length == 0)
  }

  @Test func anAnswerOverTheRolePayloadLimitIsTooLarge() throws {
    let h = try installed { _ throws(ForsettiError) in
      [UInt8](repeating: 1, count: RoleService.maxPayload + 1)
    }
    let r = answer(h, "big", [], capacity: RoleService.maxPayload + 8)
    #expect(r.status == FORSETTI_ERR_TOO_LARGE)
    #expect(r.buffer.allSatisfy { $0 == 0xAA })
  }

  // MARK: A role's consumer

  /// A fake `call` answering "pong" (mode 0), a provider's own status -42 (mode 1), or a length
  /// beyond the buffer it was given (mode 2, a broken host).
  static let fakeCall:
    @convention(c) (
      UnsafePointer<CChar>?, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int, UnsafeMutablePointer<Int>?
    ) -> Int32 = { _, _, _, out, capacity, length in
      let mode = FakeHostTests.seen.withLock {
        $0.calls += 1
        return $0.mode
      }
      switch mode {
      case 1: return -42
      case 2:
        length?.pointee = capacity + 1
        return FORSETTI_OK
      default:
        let pong: [UInt8] = Array("pong".utf8)
        pong.withUnsafeBytes {
          UnsafeMutableRawBufferPointer(start: out, count: capacity).copyMemory(from: $0)
        }
        length?.pointee = pong.count
        return FORSETTI_OK
      }
    }

  func call(mode: Int) throws(ForsettiError) -> [UInt8] {
    Self.reset(mode: mode)
    var table = forsetti_role_service(
      struct_size: UInt32(MemoryLayout<forsetti_role_service>.size), call: Self.fakeCall, serve: nil,
      serve_concurrently: nil, call_within: nil, time_left_ns: nil)
    return try withUnsafePointer(to: &table) { p throws(ForsettiError) in
      try RoleService(raw: p, box: Self.box).call("ping", text: "hi")
    }
  }

  @Test func aCallReturnsTheAnswerOrTheProvidersOwnStatusAndNeverReadsPastItsBuffer() throws {
    #expect(try call(mode: 0) == Array("pong".utf8))
    #expect(throws: ForsettiError.other(-42)) { try call(mode: 1) }
    #expect(throws: ForsettiError.io) { try call(mode: 2) }
    // One call each: the SDK never repeats a call (and with it the provider's action).
    #expect(Self.seen.withLock { $0.calls } == 1)
  }

  // MARK: An application's service

  func applicationCall(mode: Int) throws(ForsettiError) -> [UInt8] {
    Self.reset(mode: mode)
    var table = forsetti_application_service(
      struct_size: UInt32(MemoryLayout<forsetti_application_service>.size), call: Self.fakeCall)
    return try withUnsafePointer(to: &table) { p throws(ForsettiError) in
      try ApplicationService(raw: p).call("today", text: "Oslo")
    }
  }

  @Test func anApplicationServiceCallReturnsTheAnswerOrItsStatusAndNeverReadsPastItsBuffer() throws {
    #expect(try applicationCall(mode: 0) == Array("pong".utf8))
    #expect(throws: ForsettiError.other(-42)) { try applicationCall(mode: 1) }
    #expect(throws: ForsettiError.io) { try applicationCall(mode: 2) }
    #expect(Self.seen.withLock { $0.calls } == 1)
  }

  // MARK: Crypto

  static let fakeVerify:
    @convention(c) (UnsafeRawPointer?, Int, UnsafeRawPointer?, UnsafeRawPointer?) -> Int32 =
      { _, _, _, _ in
        FakeHostTests.seen.withLock {
          $0.calls += 1
          return [FORSETTI_OK, FORSETTI_ERR_INVALID_DATA, FORSETTI_ERR_IO][$0.mode]
        }
      }

  func verify(mode: Int, signature: Int = 64, key: Int = 32) throws(ForsettiError) -> Bool {
    Self.reset(mode: mode)
    var table = forsetti_crypto(
      struct_size: UInt32(MemoryLayout<forsetti_crypto>.size), random_bytes: nil, hash: nil, seal: nil,
      open: nil, sign: nil, verify: Self.fakeVerify, public_key: nil)
    return try withUnsafePointer(to: &table) { p throws(ForsettiError) in
      try Crypto(raw: p).verify(
        [UInt8](repeating: 0, count: signature), of: [1, 2, 3], publicKey: [UInt8](repeating: 0, count: key))
    }
  }

  @Test func verifyIsABoolAndAWrongSizedKeyNeverReachesTheHost() throws {
    #expect(try verify(mode: 0) == true)
    #expect(try verify(mode: 1) == false)
    #expect(throws: ForsettiError.io) { try verify(mode: 2) }
    // The C function reads exactly 64 and 32 bytes: shorter arrays must not get there.
    for (s, k) in [(63, 32), (64, 31), (0, 0), (65, 33)] {
      #expect(throws: ForsettiError.invalidArgument) { try verify(mode: 0, signature: s, key: k) }
      #expect(Self.seen.withLock { $0.calls } == 0, "signature \(s), key \(k) reached the host")
    }
  }

  @Test func inputsTheHostCouldNotSizeAreRefusedFirst() throws {
    var table = forsetti_crypto(
      struct_size: UInt32(MemoryLayout<forsetti_crypto>.size), random_bytes: { _, _ in FORSETTI_ERR_IO },
      hash: { _, _, _, _ in FORSETTI_ERR_IO }, seal: nil, open: { _, _, _, _, _, _, _ in FORSETTI_ERR_IO },
      sign: nil, verify: nil, public_key: nil)
    withUnsafePointer(to: &table) { p in
      let crypto = Crypto(raw: p)
      #expect(throws: ForsettiError.invalidArgument) { try crypto.randomBytes(-1) }
      #expect(throws: ForsettiError.invalidArgument) { try crypto.hash([1], length: 15) }
      #expect(throws: ForsettiError.invalidArgument) { try crypto.hash([1], length: 65) }
      // Shorter than nonce and tag: it cannot be anything seal made.
      #expect(throws: ForsettiError.invalidData) { try crypto.open([UInt8](repeating: 0, count: 39)) }
      // The control: sizes the SDK accepts do reach the host (whose fake answers IO).
      #expect(throws: ForsettiError.io) { try crypto.hash([1], length: 16) }
      #expect(throws: ForsettiError.io) { try crypto.open([UInt8](repeating: 0, count: 40)) }
    }
    // A service the host's table lacks a function of is unavailable, not a crash.
    #expect(throws: ForsettiError.unavailable) {
      try withUnsafePointer(to: &table) { p throws(ForsettiError) in try Crypto(raw: p).publicKey() }
    }
  }

  // MARK: Reading values of unknown size

  /// A fake secure-storage `get` holding 1000 bytes of 7 (mode 0), a host that says OK with a
  /// length beyond the buffer (mode 1), or one that says "too small" forever (mode 2).
  static let fakeGet:
    @convention(c) (UnsafePointer<CChar>?, UnsafeMutableRawPointer?, Int, UnsafeMutablePointer<Int>?)
      -> Int32 = { key, buffer, capacity, length in
        let mode = FakeHostTests.seen.withLock {
          $0.calls += 1
          return $0.mode
        }
        if let key, String(cString: key) == "absent" { return FORSETTI_ERR_NOT_FOUND }
        switch mode {
        case 1:
          length?.pointee = capacity + 1
          return FORSETTI_OK
        case 2:
          length?.pointee = capacity
          return FORSETTI_ERR_BUFFER_TOO_SMALL
        default:
          length?.pointee = 1000
          guard capacity >= 1000 else { return FORSETTI_ERR_BUFFER_TOO_SMALL }
          UnsafeMutableRawBufferPointer(start: buffer, count: 1000).initializeMemory(
            as: UInt8.self, repeating: 7)
          return FORSETTI_OK
        }
      }

  func get(_ key: String, mode: Int) throws(ForsettiError) -> [UInt8]? {
    Self.reset(mode: mode)
    var table = forsetti_secure_storage(
      struct_size: UInt32(MemoryLayout<forsetti_secure_storage>.size), set: nil, get: Self.fakeGet,
      remove: nil)
    return try withUnsafePointer(to: &table) { p throws(ForsettiError) in try SecureStorage(raw: p).get(key) }
  }

  @Test func aValueLargerThanTheFirstBufferIsReadWholeAndABrokenHostCannotLoopOrOverread() throws {
    #expect(try get("big", mode: 0) == [UInt8](repeating: 7, count: 1000))
    #expect(Self.seen.withLock { $0.calls } == 2, "one try with 256 bytes, one with the size reported")
    #expect(try get("absent", mode: 0) == nil)
    #expect(throws: ForsettiError.io) { try get("big", mode: 1) }
    #expect(throws: ForsettiError.io) { try get("big", mode: 2) }
    #expect(Self.seen.withLock { $0.calls } == 4, "a host that is never satisfied is asked a few times only")
  }
}
