import Glibc

/// Baselines for `scripts/bench`, made with the same machinery the host uses.
public enum BenchmarkProbes {
  /// A libffi closure of the shape `int32_t (*)(int64_t)` that does nothing: the floor under a
  /// bound host function of that shape (`forsetti_events.unsubscribe`).
  public static func bareClosure() -> UnsafeRawPointer? {
    guard
      let c = try? FFIClosure(arguments: [FFIType.int64], returns: FFIType.int32, handler: { _ in .int32(0) })
    else {
      return nil
    }
    return UnsafeRawPointer(c.code)
  }
}

extension BenchmarkProbes {
  /// A call ring for the raw floor of a worker call: the descriptor to hand a child, and the
  /// ring's client end (`call`) for the parent. The same mechanism workers use, with nothing
  /// on top.
  public final class Ring: Sendable {
    let ring: CallRing
    public let fd: Int32

    public init?() {
      guard let (ring, fd) = CallRing.create() else { return nil }
      self.ring = ring
      self.fd = fd
    }

    /// One round trip: `request` out, the answer into `response`; its length.
    public func call(_ request: UnsafeRawBufferPointer, response: UnsafeMutableRawBufferPointer) -> Int? {
      ring.call(request, response: response)
    }

    /// Ends the child's `echo`.
    public func close() { ring.close() }
  }

  /// The child of `Ring`: answers every request with as many bytes as a worker call's response
  /// frame has (21), until the parent closes the ring.
  public static func echo(ringFD: Int32) -> Int32 {
    guard let ring = CallRing.attach(fd: ringFD) else { return 1 }
    ring.serve { _, slot in
      guard let base = slot.baseAddress, slot.count >= 21 else { return 0 }
      base.initializeMemory(as: UInt8.self, repeating: 0, count: 21)
      return 21
    }
    return 0
  }
}
