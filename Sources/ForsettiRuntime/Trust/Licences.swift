import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc

/// A signed licence: product, licensee, expiry and the vendor key that signed them, verified
/// offline against the trusted vendor keys. File form (`STATE/licences/*.licence`):
/// `{"productID","licensee","expires":"2027-01-01T00:00:00Z","keyID","signature"}`.
package struct Licence: Sendable, Hashable {
  package var productID: String
  package var licensee: String
  package var expires: Instant
  package var expiresText: String
  package var keyID: String
  package var signature: [UInt8]

  /// The exact bytes signed: a versioned, newline-separated form, so no JSON canonicalisation
  /// question can arise.
  package static func message(productID: String, licensee: String, expires: String, keyID: String) -> [UInt8]
  {
    Array("forsetti-licence-v1\n\(productID)\n\(licensee)\n\(expires)\n\(keyID)".utf8)
  }

  package var message: [UInt8] {
    Self.message(productID: productID, licensee: licensee, expires: expiresText, keyID: keyID)
  }

  package enum Status: Sendable, Hashable, CustomStringConvertible {
    case valid
    case expired
    case untrustedKey
    case badSignature

    package var description: String {
      switch self {
      case .valid: "valid"
      case .expired: "expired"
      case .untrustedKey: "signed by a key not trusted for licences (trusted-keys/licences/)"
      case .badSignature: "signature does not match (tampered?)"
      }
    }
  }

  package func status(trusted: [String: [UInt8]], now: Instant) -> Status {
    guard let key = trusted[keyID] else { return .untrustedKey }
    guard Signatures.verify(message, signature: signature, publicKey: key) else { return .badSignature }
    return now < expires ? .valid : .expired
  }

  package static func parseTime(_ s: String) -> Instant? {
    (try? Date(s, strategy: .iso8601)).map(\.timeIntervalSince1970)
  }

  package init?(json text: String) {
    guard let o = (try? JSONParser.parse(text))?.objectValue, let p = o["productID"]?.stringValue,
      let l = o["licensee"]?.stringValue, let e = o["expires"]?.stringValue, let t = Self.parseTime(e),
      let k = o["keyID"]?.stringValue, let sig = o["signature"]?.stringValue.flatMap(Signatures.unhex)
    else { return nil }
    self.init(productID: p, licensee: l, expires: t, expiresText: e, keyID: k, signature: sig)
  }

  package init(
    productID: String, licensee: String, expires: Instant, expiresText: String, keyID: String,
    signature: [UInt8]
  ) {
    self.productID = productID
    self.licensee = licensee
    self.expires = expires
    self.expiresText = expiresText
    self.keyID = keyID
    self.signature = signature
  }

  /// Issues a licence with a vendor's secret key.
  package static func issue(productID: String, licensee: String, expires: String, secret: [UInt8]) throws
    -> Licence
  {
    guard let t = parseTime(expires) else {
      throw Signatures.KeyError.malformed("expires \(expires)", expected: 0)
    }
    let keyID = Signatures.keyID(Signatures.publicKey(ofSecret: secret))
    let sig = try Signatures.sign(
      message(productID: productID, licensee: licensee, expires: expires, keyID: keyID), secret: secret)
    return Licence(
      productID: productID, licensee: licensee, expires: t, expiresText: expires, keyID: keyID, signature: sig
    )
  }

  package var json: JSONValue {
    .object(
      JSONObject([
        ("productID", .string(productID)), ("licensee", .string(licensee)), ("expires", .string(expiresText)),
        ("keyID", .string(keyID)), ("signature", .string(Signatures.hex(signature))),
      ]))
  }
}

/// Entitlements from signed licence files plus a static list, judged at a given instant.
package struct LicenceEntitlementProvider: EntitlementProvider {
  package var licences: [(file: String, licence: Licence?)]
  package var trusted: [String: [UInt8]]
  package var staticProducts: Set<String>
  package var now: Instant

  package var name: String { "licences (\(licences.count)) + static (\(staticProducts.count))" }

  /// Reads `STATE/licences/*.licence` and the keys trusted for them,
  /// `STATE/trusted-keys/licences/*.pub`.
  package static func load(stateDirectory: String, staticProducts: Set<String>, now: Instant)
    -> LicenceEntitlementProvider
  {
    let dir = PathText.join(stateDirectory, "licences")
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter {
      $0.hasSuffix(".licence")
    }.sorted()
    let licences = names.map { n -> (String, Licence?) in
      let text =
        (try? String(contentsOfFile: PathText.join(dir, n), encoding: .utf8)) ?? ""
      return (n, Licence(json: text))
    }
    let trusted = TrustedKeys.keys(.licences, stateDirectory: stateDirectory)
    return LicenceEntitlementProvider(
      licences: licences, trusted: trusted, staticProducts: staticProducts, now: now)
  }

  package func isUnlocked(productID: String, moduleID: String) -> Bool {
    staticProducts.contains(productID)
      || licences.contains {
        $0.licence?.productID == productID && $0.licence?.status(trusted: trusted, now: now) == .valid
      }
  }

  /// Products unlocked now, sorted.
  package var activeProducts: [String] {
    Array(
      staticProducts.union(
        licences.compactMap { l in
          l.licence.flatMap { $0.status(trusted: trusted, now: now) == .valid ? $0.productID : nil }
        }
      )
    ).sorted()
  }

  /// Each licence file and what it is worth now.
  package var report: [String] {
    licences.map { l in
      guard let lic = l.licence else { return "\(l.file): not a licence file" }
      return
        "\(l.file): \(lic.productID) for \(lic.licensee) until \(lic.expiresText), key \(lic.keyID): \(lic.status(trusted: trusted, now: now))"
    }
  }

  /// The earliest expiry still ahead, for the host to re-check at.
  package var nextExpiry: Instant? {
    licences.compactMap { $0.licence?.expires }.filter { $0 > now }.min()
  }
}
