import CForsetti
import Dispatch
import ForsettiBridge
import ForsettiCore
import Glibc
import Testing

/// The provider's one handler: says it began, then waits to be let go.
private let handlerBegan = DispatchSemaphore(value: 0)
private let handlerGo = DispatchSemaphore(value: 0)

/// A call whose deadline passes while it waits for the provider's handler is retired and
/// answered without running. Its caller can still be waiting when that answer lands (both ends
/// see the deadline at once; under load in `RoleLoadTests` one consumer's call in thousands did),
/// and a caller takes an answer naming another call for none: FORSETTI_ERR_IO, which the
/// consumer counted as neither OK, BUSY nor TIMEOUT. The retired answer names its call. Real
/// rings and a real `RoleServer` with its own threads, as in a provider's worker.
@Suite struct RetiredCallAnswerTests {
  static func send(_ lane: CallRing, id: UInt64, deadline: UInt64) -> UInt32? {
    lane.send(
      encoding: { slot in
        var w = WireWriter(into: slot, kind: .serveCall, id: id)
        RoleCall.write(
          &w, capacity: 64, caller: "", method: "slow", request: UnsafeRawBufferPointer(start: nil, count: 0),
          path: RolePath(deadline: deadline))
        return w.length
      }, deadline: deadline)
  }

  /// The id and status of the answer to `seq` (waited for as long as it takes).
  static func answer(_ lane: CallRing, _ seq: UInt32) throws -> (id: UInt64, status: Int32) {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: CallRing.capacity, alignment: 8)
    defer { buffer.deallocate() }
    let n = try #require(lane.awaitAnswer(seq, response: buffer, until: nil))
    let f = try WireView(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
    let reply = try #require(ServiceReply.check(f, capacity: 64))
    return (f.id, reply.status)
  }

  @Test(.timeLimit(.minutes(1)))
  func aCallRetiredBeforeItsHandlerBeganIsAnsweredWithItsOwnID() throws {
    let server = RoleServer(role: 0, progress: nil)
    server.serve(
      ModuleCallback(
        function: { _, _, _, _, _, _, _, length in
          handlerBegan.signal()
          handlerGo.wait()
          length?.pointee = 0
          return FORSETTI_OK
        }, context: nil), concurrency: 1)
    // Two consumers, so the watcher hands calls to the handler thread (one watched channel
    // alone runs its call on the watching thread and sees no other meanwhile).
    let (first, firstFD) = try #require(ChannelRing.create(lanes: 2))
    let (second, secondFD) = try #require(ChannelRing.create(lanes: 2))
    close(firstFD)
    close(secondFD)
    server.serveChannel(first, label: "com.test.first")
    server.serveChannel(second, label: "com.test.second")

    let held = try #require(
      Self.send(first.lanes[0], id: 11, deadline: CallRing.nanoseconds() + 60_000_000_000))
    handlerBegan.wait()
    let deadline = CallRing.nanoseconds() + 20_000_000
    let late = try #require(Self.send(second.lanes[0], id: 22, deadline: deadline))
    while CallRing.nanoseconds() <= deadline { usleep(1000) }
    // Queued behind the held call, past its deadline, not answered: the only handler is busy.
    #expect(!second.lanes[0].isAnswered(late))
    handlerGo.signal()

    let retired = try Self.answer(second.lanes[0], late)
    #expect(retired.id == 22, "the retired call's answer names call \(retired.id)")
    #expect(retired.status == FORSETTI_ERR_TIMEOUT)
    // Positive control: the held call ran and was answered as itself.
    let ran = try Self.answer(first.lanes[0], held)
    #expect(ran.id == 11 && ran.status == FORSETTI_OK)
    first.close()
    second.close()
  }
}
