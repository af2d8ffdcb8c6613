import ForsettiCore

/// A manifest's SemVer version as a Debian version. A prerelease sorts before its release in
/// both, so `1.2.0-rc.1` becomes `1.2.0~rc.1` (`~` sorts before everything, even the end).
/// SemVer build metadata has no place in a manifest's version object, so there is none to drop.
enum DebianVersion {
  /// The Debian revision of every packed module: the vendor's own package of its own module.
  static let revision = "1"

  /// `1.2.0`, `1.2.0~rc.1`: what a Depends on this version says.
  static func upstream(_ v: SemanticVersion) -> String {
    "\(v.major).\(v.minor).\(v.patch)" + (v.prerelease.map { "~" + $0 } ?? "")
  }

  /// The package's version: the upstream one with the revision (`1.2.0~rc.1-1`).
  static func package(_ v: SemanticVersion) -> String { upstream(v) + "-" + revision }
}
