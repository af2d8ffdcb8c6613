/// A semantic version `major.minor.patch[-prerelease]`, ordered by SemVer 2.0 precedence.
public struct SemanticVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
  public var major: Int
  public var minor: Int
  public var patch: Int
  /// Dot-separated prerelease identifiers, e.g. `beta.1`; nil for a release.
  public var prerelease: String?

  public init(_ major: Int, _ minor: Int, _ patch: Int, prerelease: String? = nil) {
    self.major = major
    self.minor = minor
    self.patch = patch
    self.prerelease = prerelease
  }

  /// Parses `1.2.3` or `1.2.3-beta.1`; nil when the text is not of that shape.
  public init?(parsing text: String) {
    var core = Substring(text)
    var pre: String?
    if let dash = text.firstIndex(of: "-") {
      core = text[..<dash]
      let rest = String(text[text.index(after: dash)...])
      guard SemanticVersion.isValidPrerelease(rest) else { return nil }
      pre = rest
    }
    let parts = core.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3 else { return nil }
    var numbers: [Int] = []
    for part in parts {
      guard !part.isEmpty, part.allSatisfy(\.isASCIIDigit), part == "0" || !part.hasPrefix("0"),
        let n = Int(part)
      else { return nil }
      numbers.append(n)
    }
    self.init(numbers[0], numbers[1], numbers[2], prerelease: pre)
  }

  /// Whether `text` is a SemVer prerelease: non-empty dot-separated `[0-9A-Za-z-]` identifiers.
  public static func isValidPrerelease(_ text: String) -> Bool {
    let ids = text.split(separator: ".", omittingEmptySubsequences: false)
    return !ids.isEmpty
      && ids.allSatisfy { id in
        !id.isEmpty && id.allSatisfy { $0.isASCIIDigit || $0.isASCIILetter || $0 == "-" }
          && !(id.count > 1 && id.allSatisfy(\.isASCIIDigit) && id.hasPrefix("0"))
      }
  }

  public var description: String {
    "\(major).\(minor).\(patch)" + (prerelease.map { "-\($0)" } ?? "")
  }

  public static func < (a: SemanticVersion, b: SemanticVersion) -> Bool {
    if a.major != b.major { return a.major < b.major }
    if a.minor != b.minor { return a.minor < b.minor }
    if a.patch != b.patch { return a.patch < b.patch }
    switch (a.prerelease, b.prerelease) {
    case (nil, nil), (nil, _?): return false
    case (_?, nil): return true
    case (let x?, let y?): return precedes(x, y)
    }
  }

  // SemVer 2.0 §11: numeric identifiers compare numerically and sort below alphanumeric ones;
  // a shorter list of equal identifiers sorts first.
  private static func precedes(_ x: String, _ y: String) -> Bool {
    let xs = x.split(separator: ".")
    let ys = y.split(separator: ".")
    // Only all-digit identifiers are numeric: "-1" is alphanumeric, not minus one.
    func numeric(_ id: Substring) -> Int? { id.allSatisfy(\.isASCIIDigit) ? Int(id) : nil }
    for (a, b) in zip(xs, ys) where a != b {
      switch (numeric(a), numeric(b)) {
      case (let m?, let n?): return m < n
      case (_?, nil): return true
      case (nil, _?): return false
      case (nil, nil): return a < b
      }
    }
    return xs.count < ys.count
  }
}

extension Character {
  // Byte comparisons: Character.isLetter consults Unicode tables, which showed in profiles of
  // gating 1,000 manifests.
  var isASCIIDigit: Bool { asciiValue.map { $0 >= 0x30 && $0 <= 0x39 } ?? false }
  var isASCIILetter: Bool { asciiValue.map { ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A } ?? false }
}
