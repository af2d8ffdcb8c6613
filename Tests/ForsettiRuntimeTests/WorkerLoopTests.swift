import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

@testable import ForsettiRuntime

/// The pool that serves every worker (`WorkerLoop`), as docs/architecture.md describes it: its
/// base threads start with the first entry; while every thread is held by a blocking handler
/// it grows, never past its maximum; a thread above the base idle for a second ends.
@Suite struct WorkerLoopTests {
  /// Waits for `done` (a generous safety net: a loaded machine only waits longer).
  func until(_ done: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(60)
    while !done(), Date() < end { usleep(10_000) }
    return done()
  }

  @Test func aPoolGrowsWhileHandlersBlockNeverPastItsMaximumAndShrinksBackToItsBase() throws {
    let loop = WorkerLoop(baseThreads: 2, maxThreads: 5)
    defer { loop.shutdown() }
    #expect(loop.threads.running == 0)
    let release = DispatchSemaphore(value: 0)
    let entered = Atomic<Int>(0)
    // Pipes as the entries' descriptors: a byte written makes one readable.
    var bells: [(read: Int32, write: Int32)] = []
    defer { for b in bells { close(b.read); close(b.write) } }
    for _ in 0..<8 {
      var fds: [Int32] = [-1, -1]
      try #require(pipe(&fds) == 0)
      bells.append((fds[0], fds[1]))
      let bell = fds[0]
      let handler = LoopHandler { _ in
        entered.add(1, ordering: .relaxed)
        release.wait()
        return .done
      }
      try #require(loop.add(bell, handler) != nil)
    }
    #expect(loop.threads.running == 2)
    for b in bells {
      var one: UInt8 = 1
      _ = write(b.write, &one, 1)
    }
    // Five handlers blocked: every thread is held, and the pool stops there.
    #expect(until { entered.load(ordering: .relaxed) == 5 })
    #expect(loop.threads.running == 5)
    for _ in 0..<8 { release.signal() }
    #expect(until { entered.load(ordering: .relaxed) == 8 })
    #expect(loop.threads.peak == 5)
    #expect(until { loop.threads.running == 2 }, "\(loop.threads)")
  }
}
