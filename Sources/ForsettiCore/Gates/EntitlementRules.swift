/// Says whether a product is unlocked. Providers: allow-all (development only), static (a file
/// of unlocked product IDs); signed licences arrive with the trust work.
public protocol EntitlementProvider: Sendable {
  func isUnlocked(productID: String, moduleID: String) -> Bool
  /// A short name for traces.
  var name: String { get }
}

/// Unlocks everything. For tests and `dev`; never the default of `run` or `check`.
public struct AllowAllEntitlementProvider: EntitlementProvider {
  public init() {}
  public func isUnlocked(productID: String, moduleID: String) -> Bool { true }
  public var name: String { "allow-all" }
}

/// Unlocks a fixed set of product IDs, e.g. read from `{"unlockedProducts":["…"]}`.
public struct StaticEntitlementProvider: EntitlementProvider {
  public var unlockedProducts: Set<String>

  public init(unlockedProducts: Set<String> = []) { self.unlockedProducts = unlockedProducts }

  public func isUnlocked(productID: String, moduleID: String) -> Bool {
    unlockedProducts.contains(productID)
  }

  public var name: String { "static (\(unlockedProducts.count) unlocked)" }

  /// Reads `{"unlockedProducts":["com.vendor.pro", …]}`.
  public static func decode(_ value: JSONValue) -> Result<StaticEntitlementProvider, StateFileError> {
    guard let list = value.objectValue?["unlockedProducts"]?.arrayValue else {
      return .failure(.malformed(field: "unlockedProducts", expected: "an array of product IDs"))
    }
    var products = Set<String>()
    for item in list {
      guard let s = item.stringValue, !s.isEmpty else {
        return .failure(.malformed(field: "unlockedProducts", expected: "non-empty strings"))
      }
      products.insert(s)
    }
    return .success(StaticEntitlementProvider(unlockedProducts: products))
  }
}

/// Step 5 without overrides: a free module (no `iapProductID`) is unlocked; a paid one needs
/// its product unlocked. The gate runs the same rule behind the override channels
/// (`OverrideRules`); this is that rule with both channels empty.
public enum EntitlementRules {
  static func evaluation(_ m: ModuleManifest, _ provider: any EntitlementProvider) -> EntitlementEvaluation {
    OverrideRules.evaluate(m, channels: OverrideChannels(), provider: provider, activeProducts: [], now: 0)
  }

  public static func check(_ m: ModuleManifest, provider: any EntitlementProvider) -> GateOutcome {
    OverrideRules.check(evaluation(m, provider))
  }

  /// The trace line for a passing module.
  public static func passDetail(_ m: ModuleManifest, provider: any EntitlementProvider) -> String {
    evaluation(m, provider).summary
  }
}
