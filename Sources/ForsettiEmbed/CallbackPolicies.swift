import ForsettiCore

/// `bool (*)(void *ctx, const char *product_id, const char *module_id)` of `forsetti/embed.h`.
public typealias EntitlementFunction =
  @convention(c) (
    UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?
  ) -> Bool

/// `bool (*)(void *ctx, const char *module_id, const char *capability)` of `forsetti/embed.h`.
public typealias PolicyFunction =
  @convention(c) (
    UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?
  ) -> Bool

/// The application's entitlement callback as the host's entitlement source.
struct CallbackEntitlements: EntitlementProvider {
  let callback: CCallback<EntitlementFunction>

  func isUnlocked(productID: String, moduleID: String) -> Bool {
    callback.call { f, context in
      productID.withCString { p in moduleID.withCString { m in f(context, p, m) } }
    }
  }

  var name: String { "application callback" }
}

/// The application's capability-policy callback as the host's policy.
struct CallbackPolicy: CapabilityPolicy {
  let callback: CCallback<PolicyFunction>

  func allows(moduleID: String, capability: Capability) -> Bool {
    callback.call { f, context in
      moduleID.withCString { m in capability.rawValue.withCString { c in f(context, m, c) } }
    }
  }

  var name: String { "application callback" }
}
