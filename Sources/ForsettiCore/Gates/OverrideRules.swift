/// An override's answer: force on, force off, or no opinion.
public enum OverrideState: String, Sendable, Hashable {
  case on
  case off
  case unset
}

/// One source of overrides (ForgeAccess): a persisted store, an in-memory table, a time frame.
public protocol OverrideProvider: Sendable {
  var name: String { get }
  /// The override for `key` (a module ID or product ID) at `now`.
  func state(for key: String, at now: Instant) -> OverrideState
}

/// Seconds since 1970, UTC: the clock overrides and licences are judged by.
public typealias Instant = Double

/// A fixed table of overrides: the persisted store (as loaded) and the in-memory channel.
public struct TableOverrideProvider: OverrideProvider {
  public var name: String
  public var table: [String: OverrideState]

  public init(name: String, table: [String: OverrideState] = [:]) {
    self.name = name
    self.table = table
  }

  public func state(for key: String, at now: Instant) -> OverrideState { table[key] ?? .unset }
}

/// `on` or `off` between two instants: `from` inclusive, `until` exclusive; unset outside.
public struct TimeFrameOverrideProvider: OverrideProvider {
  public struct Window: Sendable, Hashable {
    public var state: OverrideState
    public var from: Instant?
    public var until: Instant?

    public init(state: OverrideState, from: Instant?, until: Instant?) {
      self.state = state
      self.from = from
      self.until = until
    }

    public func contains(_ t: Instant) -> Bool {
      (from.map { t >= $0 } ?? true) && (until.map { t < $0 } ?? true)
    }
  }

  public var name: String = "time-frame"
  public var windows: [String: [Window]]

  public init(windows: [String: [Window]] = [:]) { self.windows = windows }

  public func state(for key: String, at now: Instant) -> OverrideState {
    windows[key]?.first { $0.contains(now) }?.state ?? .unset
  }
}

/// The two override channels, each an ordered list of providers (persisted, in-memory,
/// time-frame): the first `on` or `off` in a channel decides it.
public struct OverrideChannels: Sendable {
  public var module: [any OverrideProvider]
  public var product: [any OverrideProvider]

  public init(module: [any OverrideProvider] = [], product: [any OverrideProvider] = []) {
    self.module = module
    self.product = product
  }
}

/// Why a module is or is not unlocked, step by step (`forsetti-host explain` prints it).
public struct EntitlementEvaluation: Sendable, Hashable {
  public enum DecidedBy: Sendable, Hashable {
    case free
    case moduleOverride(provider: String, OverrideState)
    case productOverride(provider: String, OverrideState)
    case provider(String)
  }

  public struct Step: Sendable, Hashable {
    public var channel: String
    public var provider: String
    public var state: OverrideState
  }

  public var unlocked: Bool
  public var decidedBy: DecidedBy
  /// Every override provider consulted, in order, with its answer.
  public var steps: [Step]
  public var requiredProduct: String?
  public var activeProducts: [String]

  public var summary: String {
    switch decidedBy {
    case .free: "free module (no iapProductID)"
    case .moduleOverride(let p, let s): "module override \(s.rawValue) from \(p)"
    case .productOverride(let p, let s): "product override \(s.rawValue) from \(p)"
    case .provider(let p):
      unlocked
        ? "product \"\(requiredProduct ?? "")\" unlocked by \(p)"
        : "product \"\(requiredProduct ?? "")\" is not unlocked by the \(p) entitlement provider"
    }
  }
}

/// The ForgeAccess rules: the module channel first (a decision there short-circuits the
/// product check), then the product channel, then the entitlement provider.
public enum OverrideRules {
  public static func evaluate(
    _ m: ModuleManifest, channels: OverrideChannels, provider: any EntitlementProvider,
    activeProducts: [String],
    now: Instant
  ) -> EntitlementEvaluation {
    var steps: [EntitlementEvaluation.Step] = []
    for p in channels.module {
      let s = p.state(for: m.moduleID, at: now)
      steps.append(.init(channel: "module", provider: p.name, state: s))
      if s != .unset {
        return .init(
          unlocked: s == .on, decidedBy: .moduleOverride(provider: p.name, s), steps: steps,
          requiredProduct: m.iapProductID, activeProducts: activeProducts)
      }
    }
    guard let product = m.iapProductID else {
      return .init(
        unlocked: true, decidedBy: .free, steps: steps, requiredProduct: nil, activeProducts: activeProducts)
    }
    for p in channels.product {
      let s = p.state(for: product, at: now)
      steps.append(.init(channel: "product", provider: p.name, state: s))
      if s != .unset {
        return .init(
          unlocked: s == .on, decidedBy: .productOverride(provider: p.name, s), steps: steps,
          requiredProduct: product, activeProducts: activeProducts)
      }
    }
    let unlocked = provider.isUnlocked(productID: product, moduleID: m.moduleID)
    return .init(
      unlocked: unlocked, decidedBy: .provider(provider.name), steps: steps, requiredProduct: product,
      activeProducts: activeProducts)
  }

  /// Step 5 with overrides: `moduleLocked` naming what decided.
  public static func check(_ e: EntitlementEvaluation) -> GateOutcome {
    if e.unlocked { return .pass }
    if case .provider = e.decidedBy { return .fail(.init(.moduleLocked, e.summary)) }
    let product = e.requiredProduct.map { "product \"\($0)\"" } ?? "the module"
    return .fail(.init(.moduleLocked, "\(product) is locked: \(e.summary)"))
  }
}
