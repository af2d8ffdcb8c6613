import CFFI
import CForsetti
import ForsettiCore

extension HostFunctions {
  /// The largest input of a crypto call (FORSETTI_CRYPTO_MAX_INPUT).
  package static let maxCryptoInput = Int(FORSETTI_CRYPTO_MAX_INPUT)
  package static let cryptoSealOverhead = Int(FORSETTI_CRYPTO_SEAL_OVERHEAD)

  /// Sends `request` and copies a reply of exactly `length` bytes into `out`.
  private static func fixedReply(
    _ b: ModuleBinding, _ request: ServiceRequest, into out: UnsafeMutableRawPointer, _ length: Int
  ) -> FFIReturn {
    let reply = b.backend.service(request, from: b.caller)
    guard reply.status == FORSETTI_OK else { return .int32(reply.status) }
    guard reply.bytes.count == length else { return .int32(FORSETTI_ERR_IO) }
    return .int32(reply.deliver(into: out, capacity: length, length: nil))
  }

  /// The table of crypto utilities (forsetti/services/crypto.h); every call becomes a `ServiceRequest` the host answers.
  package static func crypto(_ b: ModuleBinding) throws(BindingError) -> UnsafeMutableRawPointer {
    let signatureBytes = Int(FORSETTI_CRYPTO_SIGNATURE_BYTES)
    let publicKeyBytes = Int(FORSETTI_CRYPTO_PUBLIC_KEY_BYTES)
    let random = try closure([FFIType.pointer, FFIType.size], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      let n = a.size(1)
      guard n <= maxCryptoInput else { return .int32(FORSETTI_ERR_TOO_LARGE) }
      guard n > 0 else { return .int32(FORSETTI_OK) }
      guard let out = a.pointer(0) else { return invalid }
      return fixedReply(b, ServiceRequest(.cryptoRandom, capacity: n, number: Int64(n)), into: out, n)
    }
    let hash = try closure(
      [FFIType.pointer, FFIType.size, FFIType.pointer, FFIType.size], FFIType.int32
    ) { a in
      guard !b.isRevoked else { return revoked }
      let digestLength = a.size(3)
      guard
        digestLength >= Int(FORSETTI_CRYPTO_HASH_MIN) && digestLength <= Int(FORSETTI_CRYPTO_HASH_MAX),
        let digest = a.pointer(2)
      else { return invalid }
      guard a.size(1) <= maxCryptoInput else { return .int32(FORSETTI_ERR_TOO_LARGE) }
      guard let data = buffer(a, 0, 1) else { return invalid }
      return fixedReply(
        b, ServiceRequest(.cryptoHash, capacity: digestLength, number: Int64(digestLength), [Array(data)]),
        into: digest, digestLength)
    }
    // seal and open share one shape: (input, length, extra, extra_length, out, capacity, out_length).
    let sevenArguments = [
      FFIType.pointer, FFIType.size, FFIType.pointer, FFIType.size, FFIType.pointer, FFIType.size,
      FFIType.pointer,
    ]
    func sealOrOpen(_ op: ServiceOperation, inputLimit: Int) throws(BindingError) -> FFIClosure {
      try closure(sevenArguments, FFIType.int32) { a in
        guard !b.isRevoked else { return revoked }
        guard let lengthOut = a.pointer(6) else { return invalid }
        // Input and extra travel in one frame from a worker: together they are bounded.
        guard a.size(1) <= inputLimit, a.size(3) <= maxCryptoInput, a.size(1) + a.size(3) <= inputLimit else {
          return .int32(FORSETTI_ERR_TOO_LARGE)
        }
        guard let input = buffer(a, 0, 1), let extra = buffer(a, 2, 3) else { return invalid }
        let capacity = min(a.size(5), maxCryptoInput + cryptoSealOverhead)
        guard capacity == 0 || a.pointer(4) != nil else { return invalid }
        let reply = b.backend.service(
          ServiceRequest(op, capacity: capacity, [Array(input), Array(extra)]), from: b.caller)
        return .int32(
          reply.deliver(
            into: a.pointer(4), capacity: capacity, length: lengthOut.assumingMemoryBound(to: Int.self)))
      }
    }
    let seal = try sealOrOpen(.cryptoSeal, inputLimit: maxCryptoInput)
    let open = try sealOrOpen(.cryptoOpen, inputLimit: maxCryptoInput + cryptoSealOverhead)
    let sign = try closure([FFIType.pointer, FFIType.size, FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      guard a.size(1) <= maxCryptoInput else { return .int32(FORSETTI_ERR_TOO_LARGE) }
      guard let message = buffer(a, 0, 1), let signature = a.pointer(2) else { return invalid }
      return fixedReply(
        b, ServiceRequest(.cryptoSign, capacity: signatureBytes, [Array(message)]), into: signature,
        signatureBytes)
    }
    let verify = try closure(
      [FFIType.pointer, FFIType.size, FFIType.pointer, FFIType.pointer], FFIType.int32
    ) {
      a in
      guard !b.isRevoked else { return revoked }
      guard a.size(1) <= maxCryptoInput else { return .int32(FORSETTI_ERR_TOO_LARGE) }
      guard let message = buffer(a, 0, 1), let signature = a.pointer(2), let key = a.pointer(3) else {
        return invalid
      }
      // Signature and key travel as one argument: a `service` frame carries two byte strings.
      let request = ServiceRequest(
        .cryptoVerify,
        [
          Array(message),
          Array(UnsafeRawBufferPointer(start: signature, count: signatureBytes))
            + Array(UnsafeRawBufferPointer(start: key, count: publicKeyBytes)),
        ])
      return .int32(b.backend.service(request, from: b.caller).status)
    }
    let publicKey = try closure([FFIType.pointer], FFIType.int32) { a in
      guard !b.isRevoked else { return revoked }
      guard let out = a.pointer(0) else { return invalid }
      return fixedReply(
        b, ServiceRequest(.cryptoPublicKey, capacity: publicKeyBytes), into: out, publicKeyBytes)
    }

    typealias SealOrOpen =
      @convention(c) (
        UnsafeRawPointer?, Int, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int,
        UnsafeMutablePointer<Int>?
      ) -> Int32
    let t = UnsafeMutablePointer<forsetti_crypto>.allocate(capacity: 1)
    t.initialize(
      to: forsetti_crypto(
        struct_size: UInt32(MemoryLayout<forsetti_crypto>.size),
        random_bytes: random.function(as: (@convention(c) (UnsafeMutableRawPointer?, Int) -> Int32).self),
        hash: hash.function(
          as: (@convention(c) (UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int) -> Int32).self),
        seal: seal.function(as: SealOrOpen.self),
        open: open.function(as: SealOrOpen.self),
        sign: sign.function(
          as: (@convention(c) (UnsafeRawPointer?, Int, UnsafeMutableRawPointer?) -> Int32).self),
        verify: verify.function(
          as: (@convention(c) (UnsafeRawPointer?, Int, UnsafeRawPointer?, UnsafeRawPointer?) -> Int32).self),
        public_key: publicKey.function(as: (@convention(c) (UnsafeMutableRawPointer?) -> Int32).self)))
    return UnsafeMutableRawPointer(t)
  }
}
