import ForsettiBridge
import ForsettiRuntime
import Glibc
import Testing

/// A provider's role calls on a worker-to-worker channel are read from the channel ring's answer
/// sequence, which both workers can write: here the test is the hostile worker, writing that
/// word through its own mapping of the ring's memory file, as a module in a worker can.
@Suite struct ChannelRoleCallsTests {
  /// The worker's view of a one-lane channel: the ring's memory mapped again, its lane's answer
  /// sequence (word 1 of the lane's header, after the channel's) written at will.
  final class WorkerView {
    struct MapFailed: Error { let errno: Int32 }
    let base: UnsafeMutableRawPointer
    init(fd: Int32) throws {
      let p = mmap(nil, Self.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
      guard let p, p != MAP_FAILED else { throw MapFailed(errno: errno) }
      base = p
    }
    static let size = ChannelRing.headerSize + CallRing.size
    func answered(_ seq: UInt32) {
      base.storeBytes(of: seq, toByteOffset: ChannelRing.headerSize + 4, as: UInt32.self)
    }
    deinit { munmap(base, Self.size) }
  }

  func channel() throws -> (ChannelRing, WorkerView) {
    let (ring, fd) = try #require(ChannelRing.create(lanes: 1))
    defer { close(fd) }
    return (ring, try WorkerView(fd: fd))
  }

  @Test func answersAreCountedAndScribblesAreBounded() throws {
    let counters = HostMetrics().module("com.test.provider")
    let (ring, worker) = try channel()
    counters.countRoleCalls(on: ring)
    func collected() -> UInt64 {
      counters.collectChannelCalls()
      return counters.roleCalls.load(ordering: .relaxed)
    }
    #expect(collected() == 0)
    worker.answered(5)
    #expect(collected() == 5, "five answers published")
    worker.answered(3)
    #expect(collected() == 5, "a step back is not counted")
    worker.answered(4)
    #expect(collected() == 6, "counting goes on from where the sequence now is")
    worker.answered(4 &+ (1 << 31) &+ 10)
    #expect(collected() == 6, "a leap of more than 2^31 at once is not counted")
    // A real wrap past 2^32 is counted as the few answers it is.
    worker.answered(UInt32.max - 1)
    let before = collected()
    #expect(before - 6 < 1 << 31, "a scribble raises the count by less than 2^31 per scrape")
    worker.answered(2)
    #expect(collected() == before + 4, "UInt32.max - 1 → 2 is four answers")

    // Closed: read once more, then let go (later writes count for nothing).
    worker.answered(12)
    ring.close()
    #expect(collected() == before + 14)
    worker.answered(500)
    #expect(collected() == before + 14, "a closed channel is no longer read")
  }

  /// Without scrapes (no --metrics), a closed channel is counted and let go when the next one
  /// is made, so restarts do not pile up mappings.
  @Test func aClosedChannelIsLetGoWhenTheNextIsMade() throws {
    let counters = HostMetrics().module("com.test.provider")
    let (first, worker) = try channel()
    counters.countRoleCalls(on: first)
    worker.answered(7)
    first.close()
    #expect(
      counters.roleCalls.load(ordering: .relaxed) == 0, "nothing is read before a scrape or a new channel")
    let (second, _) = try channel()
    counters.countRoleCalls(on: second)
    #expect(counters.roleCalls.load(ordering: .relaxed) == 7)
    worker.answered(9)
    counters.collectChannelCalls()
    #expect(counters.roleCalls.load(ordering: .relaxed) == 7, "the first channel was let go")
  }
}
