/// The version of this host, which manifests' `minForsettiVersion`/`maxForsettiVersion` bound.
public enum ForsettiVersion {
  public static let current = SemanticVersion(0, 1, 0)
}
