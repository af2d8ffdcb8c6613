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
    try await withTaskExecutorPreference(TestThreads.shared) {
      // Here the case has a thread: from now on its time is its own, not its wait for a place.
      let began = Date()
      defer { TestTimes.record(String(describing: test.id), from: began, to: Date()) }
      try await function()
    }
  }
}

/// Where each test case ran, for `scripts/test`'s slowest-suites summary: one line per case
/// (`test-id TAB start TAB end`, seconds since 1970) appended to $FORSETTI_TEST_TIMES when set.
enum TestTimes {
  static let file = ProcessInfo.processInfo.environment["FORSETTI_TEST_TIMES"]
  static let lock = Mutex(())

  static func record(_ id: String, from: Date, to: Date) {
    guard let file else { return }
    let line = "\(id)\t\(from.timeIntervalSince1970)\t\(to.timeIntervalSince1970)\n"
    lock.withLock { _ in
      let fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
      guard fd >= 0 else { return }
      _ = line.withCString { write(fd, $0, strlen($0)) }
      close(fd)
    }
  }
}

extension Trait where Self == OnTestThreads {
  /// The suite's test bodies block (processes, pipes, compilers): run them on the tests' threads.
  public static var onTestThreads: Self { OnTestThreads() }
}
