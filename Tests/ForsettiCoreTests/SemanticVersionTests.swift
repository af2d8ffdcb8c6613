import ForsettiCore
import Testing

private func v(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> SemanticVersion {
  try #require(SemanticVersion(parsing: text), "\(text) should parse", sourceLocation: sourceLocation)
}

@Suite("SemanticVersion parsing")
struct SemanticVersionParsingTests {
  @Test("a release version parses into its parts")
  func release() throws {
    let version = try v("10.20.30")
    #expect((version.major, version.minor, version.patch) == (10, 20, 30))
    #expect(version.prerelease == nil)
    #expect(version == SemanticVersion(10, 20, 30))
  }

  @Test("a prerelease version keeps its identifiers")
  func prerelease() throws {
    let version = try v("1.2.3-beta.1")
    #expect(version == SemanticVersion(1, 2, 3, prerelease: "beta.1"))
    #expect(version.prerelease == "beta.1")
  }

  @Test(
    "valid versions parse and print back unchanged",
    arguments: [
      "0.0.0", "1.2.3", "0.1.0", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7",
      "1.0.0-x.7.z.92", "1.0.0-alpha-1", "1.0.0-x-y-z.--", "2.0.0-rc.1", "1.2.3-0", "1.2.3-0A",
    ])
  func validRoundTrip(_ text: String) throws {
    #expect(try v(text).description == text)
  }

  @Test(
    "malformed versions do not parse",
    arguments: [
      "1.2", "01.2.3", "1.02.3", "1.2.03", "1.2.3-", "a.b.c", "", "1", "1.2.3.4", "1..3", "v1.2.3",
      "1.2.3-beta..1", "1.2.3-.beta", "1.2.3-beta.", "1.2.3-01", "1.2.3-beta_1", "1.2.3-é", " 1.2.3",
      "1.2.3 ", "-1.2.3", "1.-2.3", "1.2.x", "+1.2.3", "１.2.3", "99999999999999999999.0.0",
    ])
  func malformed(_ text: String) {
    #expect(SemanticVersion(parsing: text) == nil, "\(text) must not parse")
  }

  @Test("description of a constructed version")
  func description() {
    #expect(SemanticVersion(0, 1, 0).description == "0.1.0")
    #expect(SemanticVersion(1, 0, 0, prerelease: "rc.1").description == "1.0.0-rc.1")
  }

  @Test(
    "isValidPrerelease follows SemVer",
    arguments: [
      ("alpha", true), ("alpha.1", true), ("0", true), ("0a", true), ("-", true), ("rc-1.2", true),
      ("", false), ("01", false), ("a..b", false), ("a.", false), ("a+b", false), ("a b", false),
    ])
  func prereleaseRule(_ text: String, _ valid: Bool) {
    #expect(SemanticVersion.isValidPrerelease(text) == valid)
  }
}

@Suite("SemanticVersion ordering")
struct SemanticVersionOrderingTests {
  /// Each strictly precedes the next.
  static func assertChain(_ texts: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
    let versions = try texts.map { try v($0, sourceLocation: sourceLocation) }
    for i in versions.indices {
      for j in versions.indices where i < j {
        #expect(versions[i] < versions[j], "\(texts[i]) < \(texts[j])", sourceLocation: sourceLocation)
        #expect(!(versions[j] < versions[i]), "not \(texts[j]) < \(texts[i])", sourceLocation: sourceLocation)
        #expect(versions[i] != versions[j], sourceLocation: sourceLocation)
      }
    }
    #expect(versions.reversed().sorted() == versions, sourceLocation: sourceLocation)
  }

  @Test("SemVer prerelease precedence (the brief's chain)")
  func prereleaseChain() throws {
    try Self.assertChain([
      "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-rc.1", "1.0.0",
    ])
  }

  @Test("SemVer 2.0 §11 example chain")
  func specChain() throws {
    try Self.assertChain([
      "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
      "1.0.0-rc.1", "1.0.0",
    ])
  }

  @Test("major, minor and patch compare numerically, not as text")
  func coreNumeric() throws {
    try Self.assertChain(["0.9.9", "1.0.0", "1.2.3", "1.2.4", "1.2.10", "1.3.0", "1.10.0", "2.0.0", "10.0.0"])
  }

  @Test("a prerelease sorts below its release and above the previous release")
  func prereleaseBelowRelease() throws {
    try Self.assertChain(["1.2.2", "1.2.3-beta.1", "1.2.3", "1.2.4-alpha", "1.2.4"])
  }

  @Test("numeric identifiers compare numerically and sort below alphanumeric ones")
  func numericIdentifiers() throws {
    try Self.assertChain(["1.0.0-1", "1.0.0-2", "1.0.0-10", "1.0.0-alpha"])
    try Self.assertChain(["1.0.0-beta.9", "1.0.0-beta.10", "1.0.0-beta.a"])
  }

  @Test("an identifier with a hyphen is alphanumeric, even when the rest is digits")
  func hyphenIdentifierIsAlphanumeric() throws {
    // SemVer 2.0 §9/§11: "-1" contains a non-digit, so it is alphanumeric and sorts above "1".
    try Self.assertChain(["1.0.0-1", "1.0.0--1"])
  }

  @Test("alphanumeric identifiers compare in ASCII order")
  func asciiOrder() throws {
    try Self.assertChain(["1.0.0-Beta", "1.0.0-alpha", "1.0.0-alpha-1", "1.0.0-alphb"])
  }

  @Test("equal versions are equal and neither precedes the other")
  func equality() throws {
    for text in ["1.2.3", "1.2.3-rc.1"] {
      let a = try v(text)
      let b = try v(text)
      #expect(a == b)
      #expect(!(a < b) && !(b < a))
      #expect(a <= b && a >= b)
    }
  }
}
