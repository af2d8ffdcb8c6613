import ForsettiCore
import Synchronization

/// The in-memory override provider of both channels: set while the host runs (through its
/// control socket), consulted after the persisted store and before the time-frame windows,
/// and gone when the host stops. Copies of a `HostConfiguration` share one table.
package final class InMemoryOverrides: Sendable {
  /// Both channels' tables, module IDs and product IDs to `on` or `off`.
  package typealias Tables = (modules: [String: OverrideState], products: [String: OverrideState])

  private struct Both {
    var modules: [String: OverrideState] = [:]
    var products: [String: OverrideState] = [:]

    subscript(channel: OverrideChannel) -> [String: OverrideState] {
      get { channel == .module ? modules : products }
      set { if channel == .module { modules = newValue } else { products = newValue } }
    }
  }

  private let tables: Mutex<Both>

  /// An empty table, or one holding `modules` and `products` (`.unset` entries are dropped).
  package init(
    modules: [String: OverrideState] = [:], products: [String: OverrideState] = [:]
  ) {
    tables = Mutex(
      Both(modules: modules.filter { $0.value != .unset }, products: products.filter { $0.value != .unset }))
  }

  /// Forces `id` on or off in `channel` (`.unset` clears it); returns what it was before.
  @discardableResult
  package func set(channel: OverrideChannel, id: String, state: OverrideState) -> OverrideState {
    tables.withLock {
      let before = $0[channel][id] ?? .unset
      $0[channel][id] = state == .unset ? nil : state
      return before
    }
  }

  /// Removes `id`'s override from `channel`; returns what it was before (`.unset`: none).
  @discardableResult
  package func clear(channel: OverrideChannel, id: String) -> OverrideState {
    set(channel: channel, id: id, state: .unset)
  }

  /// `id`'s override in `channel` now (`.unset`: none).
  package func state(channel: OverrideChannel, id: String) -> OverrideState {
    tables.withLock { $0[channel][id] ?? .unset }
  }

  /// Both tables as they are now, for one judgement.
  package var snapshot: Tables {
    tables.withLock { ($0.modules, $0.products) }
  }
}
