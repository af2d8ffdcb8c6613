/// A ring's answer copied out of shared memory, in memory of the holder's own that lives as long
/// as the holder (`CallRing.capacity` bytes, so a call allocates nothing): the worker's call ring,
/// each lane of a consumer's role channel, the host's side of a serve ring.
package final class AnswerBuffer: @unchecked Sendable {
  // @unchecked: every holder lets one thread at a time use it, by its own rule (the worker's
  // call lock, the thread that took the lane, the host's serve turn), said where it is held.
  package let bytes: UnsafeMutableRawBufferPointer

  package init() { bytes = .allocate(byteCount: CallRing.capacity, alignment: 8) }

  deinit { bytes.deallocate() }
}
