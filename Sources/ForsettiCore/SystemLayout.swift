/// Where a packaged host and packaged modules live on a Debian system. The host's package owns
/// these directories and its systemd unit reads them; `forsetti-host pack` installs a module's
/// files into them. The one place in code that spells the prefix: scripts and tests that name
/// these paths are checked against it.
public struct SystemLayout: Sendable, Hashable {
  /// The host's own directory of system modules: `/usr/lib/forsetti`.
  public var prefix: String
  /// Where module packages ship their vendors' public keys: `/usr/share/forsetti/keys`. Keys
  /// there are not trusted; an operator trusts one with `forsetti-host trust`.
  public var vendorKeys: String

  public init(prefix: String, vendorKeys: String) {
    self.prefix = prefix
    self.vendorKeys = vendorKeys
  }

  /// The layout of the Debian packages.
  public static let debian = SystemLayout(prefix: "/usr/lib/forsetti", vendorKeys: "/usr/share/forsetti/keys")

  /// Module binaries (and their detached `.sig` beside them): the unit's `--plugins`.
  public var plugins: String { prefix + "/plugins" }
  /// Module manifests: the unit's `--manifests`.
  public var manifests: String { prefix + "/manifests" }

  /// Where a module's binary named `fileName` is installed.
  public func plugin(_ fileName: String) -> String { plugins + "/" + fileName }
  /// Where the manifest of `moduleID` is installed.
  public func manifest(moduleID: String) -> String { manifests + "/" + moduleID + ".json" }
  /// Where the public key of the vendor of `moduleID` is shipped (not trusted by being there).
  public func vendorKey(moduleID: String) -> String { vendorKeys + "/" + moduleID + ".pub" }
}
