import Dispatch
import ForsettiSDK
import Synchronization

/// A service module: counts its starts in storage (the count survives restarts), records a
/// telemetry event, and publishes `counter.tick` events that other modules receive.
final class Counter: ForsettiModule, Sendable {
  static let identity = ModuleIdentity("com.example.counter", kind: .service, version: (1, 0, 0))

  private let queue = DispatchQueue(label: "com.example.counter.ticks")
  private let running = Atomic<Bool>(false)
  private let ticks = Mutex(0)

  required init() {}

  func start(_ host: Host) throws(ForsettiError) {
    guard let storage = host.storage, let events = host.events else { throw .denied }
    let starts = (Int(try storage.string("starts") ?? "0") ?? 0) + 1
    try storage.set("starts", string: String(starts))
    host.log("start number \(starts) (the count lives in \(host.sandboxPath))")
    try? host.telemetry?.record("counter.started", attributesJSON: "{\"starts\":\(starts)}")
    running.store(true, ordering: .releasing)
    scheduleTick(events, after: .milliseconds(200))
  }

  private func scheduleTick(_ events: Events, after delay: DispatchTimeInterval) {
    queue.asyncAfter(deadline: .now() + delay) {
      guard self.running.load(ordering: .acquiring) else { return }
      let n = self.ticks.withLock { n in
        n += 1
        return n
      }
      try? events.publish("counter.tick", text: String(n))
      self.scheduleTick(events, after: .milliseconds(500))
    }
  }

  /// Hot reload (`forsetti-host dev`): the tick count survives a rebuild.
  func saveState() -> [UInt8]? { Array(String(ticks.withLock { $0 }).utf8) }

  func restoreState(_ bytes: [UInt8]) {
    let n = Int(String(decoding: bytes, as: UTF8.self)) ?? 0
    ticks.withLock { $0 = n }
  }

  func stop() {
    // Stop scheduling and wait for a tick in flight, so no host call happens after stop returns.
    running.store(false, ordering: .releasing)
    queue.sync {}
  }
}

@_cdecl("counter_module_entry") public func counterModuleEntry(_ abi: UInt32) -> UnsafeRawPointer? {
  Forsetti.export(Counter.self, hostABI: abi)
}
