/// A platform a module declares support for. Names are case-sensitive, as in Forsetti.
public enum Platform: String, Sendable, Hashable, CaseIterable {
  case iOS
  case macOS
  case linux

  /// The platform this host runs on.
  public static let host: Platform = .linux
}
