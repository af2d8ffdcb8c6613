import ForsettiSDK
import Synchronization

/// A ui module: contributes a toolbar item and a view to the host surface, listens to the
/// counter's ticks and to direct messages, and reports what it saw when it stops.
final class Dashboard: ForsettiModule, Sendable {
  static let identity = ModuleIdentity("com.example.dashboard", kind: .ui, version: (1, 0, 0))

  private let seen = Mutex(0)
  private let host = Mutex<Host?>(nil)

  required init() {}

  var uiContributions: UIContributionSet? {
    UIContributionSet(
      toolbarItems: [.init("dashboard.refresh", title: "Refresh")],
      views: [.init("dashboard.summary", slot: "main.sidebar", priority: 10)])
  }

  func start(_ host: Host) throws(ForsettiError) {
    guard let events = host.events, let messages = host.messages else { throw .denied }
    self.host.withLock { $0 = host }
    try events.subscribe("counter.tick") { event in
      let n = self.seen.withLock { n in
        n += 1
        return n
      }
      if n == 1 { host.log("first tick from \(event.source): \(event.text)") }
    }
    try messages.onMessage { message in
      host.log("message \(message.type) from \(message.source): \(message.text)")
    }
    host.log("showing dashboard.summary in main.sidebar")
  }

  func stop() {
    let n = seen.withLock { $0 }
    host.withLock { $0?.log("saw \(n) tick\(n == 1 ? "" : "s")") }
  }
}

@_cdecl("dashboard_module_entry") public func dashboardModuleEntry(_ abi: UInt32) -> UnsafeRawPointer? {
  Forsetti.export(Dashboard.self, hostABI: abi)
}
