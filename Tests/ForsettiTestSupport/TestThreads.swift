import Foundation
import Synchronization
import Testing

/// Threads of the tests' own for test bodies that block: waiting on a host process, a pipe, a
/// compiler. Swift Testing runs every test on the concurrency pool, which has one thread per core,
/// so on a two-core machine two blocked tests held the whole run while the CPU sat idle. Here a
/// blocked test holds one of `width` threads; the pool's threads stay free to start the next.
public final class TestThreads: TaskExecutor {
  /// Enough places to overlap the waits of tests that start hosts; few enough that the work
  /// itself (compilers, hosts, workers) does not bury a two-core machine.
  public static let shared = TestThreads(width: 8)

  private let jobs = Mutex<[UnownedJob]>([])
  private let waiting = DispatchSemaphore(value: 0)

  init(width: Int) {
    for n in 0..<width {
      let thread = Thread { [self] in self.serve() }
      thread.name = "test-thread-\(n)"
      // Test bodies recurse through fixtures and parsers as they would on the main thread.
      thread.stackSize = 8 << 20
      thread.start()
    }
  }

  public func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    jobs.withLock { $0.append(job) }
    waiting.signal()
  }

  private func serve() {
    while true {
      waiting.wait()
      guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
      job.runSynchronously(on: asUnownedTaskExecutor())
    }
  }
}

/// Runs each test case of the suite (or test) it is given to on `TestThreads.shared`.
public struct OnTestThreads: SuiteTrait, TestTrait, TestScoping {
  public var isRecursive: Bool { true }

  public func provideScope(
    for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
  ) async throws {
    guard testCase != nil else { return try await function() }
    try await withTaskExecutorPreference(TestThreads.shared) { try await function() }
  }
}

extension Trait where Self == OnTestThreads {
  /// The suite's test bodies block (processes, pipes, compilers): run them on the tests' threads.
  public static var onTestThreads: Self { OnTestThreads() }
}
