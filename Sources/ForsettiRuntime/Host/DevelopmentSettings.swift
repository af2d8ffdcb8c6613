/// `dev`'s hot reload: how long a new version must live to be kept, and how long file changes
/// must settle before they make one reload.
public struct DevelopmentSettings: Sendable, Hashable {
  /// A new version that ends within this many seconds of its start is rolled back.
  public var grace: Double
  /// Changes closer together than this many seconds make one reload.
  public var debounce: Double

  public init(grace: Double, debounce: Double) {
    self.grace = grace
    self.debounce = debounce
  }
}
