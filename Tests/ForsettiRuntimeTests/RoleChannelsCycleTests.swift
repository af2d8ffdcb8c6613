import CForsetti
import ForsettiBridge
import ForsettiCore
import Glibc
import Testing

@testable import ForsettiRuntime

/// The host's cycle verdict (`RoleChannels.judgeQueued`) on real rings and real progress pages,
/// the words written as two workers would: a call closing a cycle of full modules is withdrawn
/// and refused; the same request naming a lane out of range, or made for a channel that is not
/// the asker's own (a `service(roleWaiting)` forged with another module's lane), touches nothing.
@Suite struct RoleChannelsCycleTests {
  /// One worker's rings and own page, as the host makes them (`CallRing.create`).
  struct Worker {
    let ring: CallRing
    let owner: ObjectIdentifier
    let progress: WorkerProgress
    init() throws {
      let (ring, fd) = try #require(CallRing.create())
      close(fd)
      self.ring = ring
      owner = ObjectIdentifier(ring)
      progress = try #require(ring.progress)
    }
  }

  static let a = "com.test.a"  // serves shared_database (role 0), calls authentication
  static let b = "com.test.b"  // serves authentication (role 1), calls shared_database

  /// A and B, concurrency 1 each, each with its one handler in a call and one thread waiting on
  /// the other's role; B's call to A sits queued on lane 0 of B's channel to A.
  func mutualPair() throws -> (RoleChannels, Worker, Worker, ChannelRing, UInt32) {
    let channels = RoleChannels()
    let wa = try Worker()
    let wb = try Worker()
    for (id, w, role) in [(Self.a, wa, 0), (Self.b, wb, 1)] {
      channels.serving(
        .init(
          moduleID: id, owner: w.owner, concurrency: 1, role: role, serveRing: try #require(w.ring.serves),
          progress: w.progress, kill: { _ in }))
    }
    let (ab, abFD) = try #require(
      channels.open(
        consumer: Self.a, consumerOwner: wa.owner, consumerProgress: wa.progress, provider: Self.b))
    let (ba, baFD) = try #require(
      channels.open(
        consumer: Self.b, consumerOwner: wb.owner, consumerProgress: wb.progress, provider: Self.a))
    close(abFD)
    close(baFD)
    let now = CallRing.nanoseconds()
    wa.progress.begin(0, started: now, deadline: now + 10_000_000_000)
    wb.progress.begin(0, started: now, deadline: now + 10_000_000_000)
    wa.progress.waiting(on: 1, 1)
    wb.progress.waiting(on: 0, 1)
    _ = ab.lanes[0].send(encoding: { _ in 0 }, deadline: now + 10_000_000_000)
    let seq = try #require(ba.lanes[0].send(encoding: { _ in 0 }, deadline: now + 10_000_000_000))
    return (channels, wa, wb, ba, seq)
  }

  @Test func aCallClosingACycleOfFullModulesIsWithdrawnAndRefused() throws {
    let (channels, _, wb, ba, seq) = try mutualPair()
    let status = channels.judgeQueued(consumer: Self.b, owner: wb.owner, provider: Self.a, lane: 0)
    #expect(status == FORSETTI_ERR_CALL_CYCLE)
    #expect(!ba.lanes[0].begin(seq), "withdrawn: no handler can begin it")
  }

  @Test func aForgedLaneOrAnotherModulesChannelTouchesNothing() throws {
    let (channels, wa, wb, ba, seq) = try mutualPair()
    // Out of range, and past any channel's lanes: nothing to judge.
    for lane in [ChannelRing.maxLanes, 255] {
      #expect(
        channels.judgeQueued(consumer: Self.b, owner: wb.owner, provider: Self.a, lane: lane) == FORSETTI_OK)
    }
    // A's worker asking about B's channel: the host finds channels by the asker's own worker.
    #expect(channels.judgeQueued(consumer: Self.b, owner: wa.owner, provider: Self.a, lane: 0) == FORSETTI_OK)
    // B's call is still queued: the genuine question refuses it (positive control).
    #expect(
      channels.judgeQueued(consumer: Self.b, owner: wb.owner, provider: Self.a, lane: 0)
        == FORSETTI_ERR_CALL_CYCLE)
    #expect(!ba.lanes[0].begin(seq))
  }

  /// The same pair with a free handler at A: B's call will run, no cycle.
  @Test func aProviderWithAFreeHandlerClosesNoCycle() throws {
    let (channels, wa, wb, ba, seq) = try mutualPair()
    wa.progress.end(0)
    #expect(channels.judgeQueued(consumer: Self.b, owner: wb.owner, provider: Self.a, lane: 0) == FORSETTI_OK)
    #expect(ba.lanes[0].begin(seq), "still queued, and a handler may begin it")
  }
}
