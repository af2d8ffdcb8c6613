import Glibc

/// The common case of manifest decoding, in one pass over the bytes and without a JSON tree.
///
/// Discovery decodes every manifest each time the host starts, and building the tree and then
/// reading it cost several times the syscalls of opening the file. This path reads a valid
/// manifest of the usual shape straight into a `ModuleManifest`. Anything else — a syntax
/// error, an escape in a string, a key it does not know, `runtimeRequirements`, any value the
/// full decoder would report — makes it answer nil, and the caller takes the full path
/// (`JSONParser` + `ManifestDecoder`), which yields the same manifest or every issue. It never
/// reports an error itself, so messages have one source; tests check both paths agree.
enum ManifestFastPath {
  static func decode(_ bytes: [UInt8]) -> ModuleManifest? {
    bytes.withUnsafeBufferPointer { buffer in
      var scanner = Scanner(bytes: buffer)
      return scanner.manifest()
    }
  }

  /// The root keys this path reads; any other key sends the manifest to the full path.
  private enum Field: CaseIterable {
    case schemaVersion, manifestTemplateVersion, moduleID, displayName, moduleVersion, moduleType
    case supportedPlatforms, minForsettiVersion, maxForsettiVersion, capabilitiesRequested
    case iapProductID, entryPoint, defaultModuleRole, runtimeRequirements

    /// The field named by `key` and its bit in the set of fields seen.
    static func named(_ key: UnsafeBufferPointer<UInt8>) -> (field: Field, bit: UInt32)? {
      // Narrowed by length first: walking `allCases` built that array for every key read.
      let field: Field
      switch key.count {
      case 8: field = key.equals("moduleID") ? .moduleID : .schemaVersion
      case 10: field = key.equals("moduleType") ? .moduleType : .entryPoint
      case 11: field = key.equals("displayName") ? .displayName : .schemaVersion
      case 12: field = key.equals("iapProductID") ? .iapProductID : .schemaVersion
      case 13:
        field = key.equals("schemaVersion") ? .schemaVersion : .moduleVersion
      case 17: field = key.equals("defaultModuleRole") ? .defaultModuleRole : .schemaVersion
      case 18:
        field =
          key.equals("supportedPlatforms")
          ? .supportedPlatforms : key.equals("minForsettiVersion") ? .minForsettiVersion : .maxForsettiVersion
      case 19: field = key.equals("runtimeRequirements") ? .runtimeRequirements : .schemaVersion
      case 21: field = key.equals("capabilitiesRequested") ? .capabilitiesRequested : .schemaVersion
      case 23: field = key.equals("manifestTemplateVersion") ? .manifestTemplateVersion : .schemaVersion
      default: return nil
      }
      // Every guess above is confirmed here, so a key of the right length but another name
      // (and every other length) is unknown.
      guard key.equals(field.name) else { return nil }
      return (field, field.bit)
    }

    /// The field's bit in the set of fields seen.
    var bit: UInt32 {
      switch self {
      case .schemaVersion: 1 << 0
      case .manifestTemplateVersion: 1 << 1
      case .moduleID: 1 << 2
      case .displayName: 1 << 3
      case .moduleVersion: 1 << 4
      case .moduleType: 1 << 5
      case .supportedPlatforms: 1 << 6
      case .minForsettiVersion: 1 << 7
      case .maxForsettiVersion: 1 << 8
      case .capabilitiesRequested: 1 << 9
      case .iapProductID: 1 << 10
      case .entryPoint: 1 << 11
      case .defaultModuleRole: 1 << 12
      case .runtimeRequirements: 1 << 13
      }
    }

    var name: StaticString {
      switch self {
      case .schemaVersion: "schemaVersion"
      case .manifestTemplateVersion: "manifestTemplateVersion"
      case .moduleID: "moduleID"
      case .displayName: "displayName"
      case .moduleVersion: "moduleVersion"
      case .moduleType: "moduleType"
      case .supportedPlatforms: "supportedPlatforms"
      case .minForsettiVersion: "minForsettiVersion"
      case .maxForsettiVersion: "maxForsettiVersion"
      case .capabilitiesRequested: "capabilitiesRequested"
      case .iapProductID: "iapProductID"
      case .entryPoint: "entryPoint"
      case .defaultModuleRole: "defaultModuleRole"
      case .runtimeRequirements: "runtimeRequirements"
      }
    }
  }

  private struct Scanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var pos = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func manifest() -> ModuleManifest? {
      var seen: UInt32 = 0
      var schemaVersion: String?
      var template: String?
      var moduleID: String?
      var displayName: String?
      var moduleVersion: SemanticVersion?
      var moduleType: ModuleType?
      var platforms: [Platform]?
      var minVersion: SemanticVersion?
      var maxVersion: SemanticVersion?
      var capabilities: [Capability]?
      var product: String?
      var entryPoint: String?
      var role: DefaultModuleRole?

      guard take(UInt8(ascii: "{")) else { return nil }
      if take(UInt8(ascii: "}")) { return nil }
      repeat {
        guard let key = rawString(), take(UInt8(ascii: ":")), let (field, bit) = Field.named(key) else {
          return nil
        }
        guard seen & bit == 0 else { return nil }
        seen |= bit
        // `null` means absent, as in the full decoder; a required field then sends it there.
        if takeNull() { continue }
        switch field {
        case .schemaVersion: schemaVersion = string()
        case .manifestTemplateVersion: template = string()
        case .moduleID: moduleID = string()
        case .displayName: displayName = string()
        case .moduleVersion: moduleVersion = version()
        case .moduleType: moduleType = enumValue(in: moduleTypes)
        case .supportedPlatforms: platforms = enumList(in: platformNames)
        case .minForsettiVersion: minVersion = version()
        case .maxForsettiVersion: maxVersion = version()
        case .capabilitiesRequested: capabilities = enumList(in: capabilityNames)
        case .iapProductID: product = string()
        case .entryPoint: entryPoint = string()
        case .defaultModuleRole: role = enumValue(in: roleNames)
        case .runtimeRequirements: return nil
        }
        // Each present field must have been read; a nil here is a value the full path reports.
        switch field {
        case .schemaVersion: guard schemaVersion != nil else { return nil }
        case .manifestTemplateVersion: guard template != nil else { return nil }
        case .moduleID: guard moduleID != nil else { return nil }
        case .displayName: guard displayName != nil else { return nil }
        case .moduleVersion: guard moduleVersion != nil else { return nil }
        case .moduleType: guard moduleType != nil else { return nil }
        case .supportedPlatforms: guard platforms != nil else { return nil }
        case .minForsettiVersion: guard minVersion != nil else { return nil }
        case .maxForsettiVersion: guard maxVersion != nil else { return nil }
        case .capabilitiesRequested: guard capabilities != nil else { return nil }
        case .iapProductID: guard product != nil else { return nil }
        case .entryPoint: guard entryPoint != nil else { return nil }
        case .defaultModuleRole: guard role != nil else { return nil }
        case .runtimeRequirements: return nil
        }
      } while take(UInt8(ascii: ","))
      guard take(UInt8(ascii: "}")) else { return nil }
      skipWhitespace()
      guard pos == bytes.count else { return nil }

      // The full decoder's rules for values that parsed; any failure is its to report.
      guard let schemaVersion, let moduleID, let displayName, let moduleVersion, let moduleType,
        let platforms, let minVersion, let capabilities, let entryPoint,
        !moduleID.hasPrefix("forsetti."), ManifestText.isModuleID(moduleID),
        !ManifestText.isBlank(displayName), !platforms.isEmpty, ManifestText.isCIdentifier(entryPoint),
        product.map({ !ManifestText.isBlank($0) }) ?? true,
        maxVersion.map({ !($0 < minVersion) }) ?? true
      else { return nil }
      return ModuleManifest(
        schemaVersion: schemaVersion, manifestTemplateVersion: template, moduleID: moduleID,
        displayName: displayName, moduleVersion: moduleVersion, moduleType: moduleType,
        supportedPlatforms: platforms, minForsettiVersion: minVersion, maxForsettiVersion: maxVersion,
        capabilitiesRequested: capabilities, iapProductID: product, entryPoint: entryPoint,
        defaultModuleRole: role, runtimeRequirements: nil)
    }

    mutating func skipWhitespace() {
      while pos < bytes.count {
        switch bytes[pos] {
        case 0x20, 0x0A, 0x0D, 0x09: pos += 1
        default: return
        }
      }
    }

    /// Skips whitespace, then consumes `byte` if it is next.
    mutating func take(_ byte: UInt8) -> Bool {
      skipWhitespace()
      guard pos < bytes.count, bytes[pos] == byte else { return false }
      pos += 1
      return true
    }

    mutating func takeNull() -> Bool {
      skipWhitespace()
      guard pos + 4 <= bytes.count, bytes[pos] == UInt8(ascii: "n"), bytes[pos + 1] == UInt8(ascii: "u"),
        bytes[pos + 2] == UInt8(ascii: "l"), bytes[pos + 3] == UInt8(ascii: "l")
      else { return false }
      pos += 4
      return true
    }

    /// A string without escapes or control characters, as its raw bytes.
    mutating func rawString() -> UnsafeBufferPointer<UInt8>? {
      guard take(UInt8(ascii: "\"")) else { return nil }
      let start = pos
      while pos < bytes.count {
        let b = bytes[pos]
        if b == UInt8(ascii: "\"") {
          pos += 1
          return UnsafeBufferPointer(rebasing: bytes[start..<pos - 1])
        }
        if b == UInt8(ascii: "\\") || b < 0x20 { return nil }
        pos += 1
      }
      return nil
    }

    mutating func string() -> String? {
      guard let raw = rawString() else { return nil }
      if raw.allSatisfy({ $0 < 0x80 }) { return String(decoding: raw, as: UTF8.self) }
      // A character the module-text rule escapes (C1, a separator, a bidi control) is the full
      // decoder's to refuse, with its message.
      guard let s = String(validating: raw, as: UTF8.self), ModuleText.isPlain(s) else { return nil }
      return s
    }

    /// A string naming one of `table`'s values, matched on its raw bytes (no String is made).
    /// Anything else, blank or unknown, is nil, as the full decoder refuses it.
    mutating func enumValue<E>(in table: [([UInt8], E)]) -> E? {
      guard let raw = rawString() else { return nil }
      for (name, value) in table where raw.elementsEqual(name) { return value }
      return nil
    }

    /// A list of `table`'s values without duplicates. A duplicate string is a duplicate value
    /// (raw values are distinct), and a blank or unknown one matches none: each makes it nil,
    /// as the full decoder refuses each. There are fewer values than its list bound (1024).
    mutating func enumList<E: Equatable>(in table: [([UInt8], E)]) -> [E]? {
      guard take(UInt8(ascii: "[")) else { return nil }
      var out: [E] = []
      if take(UInt8(ascii: "]")) { return out }
      repeat {
        guard let e = enumValue(in: table), !out.contains(e) else { return nil }
        out.append(e)
      } while take(UInt8(ascii: ","))
      return take(UInt8(ascii: "]")) ? out : nil
    }

    /// A JSON integer as the full decoder accepts it for a version part: digits only.
    mutating func integer() -> Int? {
      skipWhitespace()
      let start = pos
      var n = 0
      while pos < bytes.count, bytes[pos] &- UInt8(ascii: "0") < 10, pos - start < 18 {
        n = n * 10 + Int(bytes[pos] &- UInt8(ascii: "0"))
        pos += 1
      }
      let digits = pos - start
      guard digits > 0, !(digits > 1 && bytes[start] == UInt8(ascii: "0")), pos < bytes.count else {
        return nil
      }
      // A fraction, an exponent or a nineteenth digit is the full path's to judge.
      switch bytes[pos] {
      case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"):
        return nil
      default: return n
      }
    }

    /// `{"major","minor","patch"[,"prerelease"]}`, each once, nothing else.
    mutating func version() -> SemanticVersion? {
      guard take(UInt8(ascii: "{")) else { return nil }
      var parts: (Int?, Int?, Int?) = (nil, nil, nil)
      var prerelease: String?
      var sawPrerelease = false
      repeat {
        guard let key = rawString(), take(UInt8(ascii: ":")) else { return nil }
        if key.equals("major") && parts.0 == nil {
          guard let n = integer() else { return nil }
          parts.0 = n
        } else if key.equals("minor") && parts.1 == nil {
          guard let n = integer() else { return nil }
          parts.1 = n
        } else if key.equals("patch") && parts.2 == nil {
          guard let n = integer() else { return nil }
          parts.2 = n
        } else if key.equals("prerelease") && !sawPrerelease {
          sawPrerelease = true
          if !takeNull() {
            guard let s = string(), SemanticVersion.isValidPrerelease(s) else { return nil }
            prerelease = s
          }
        } else {
          return nil
        }
      } while take(UInt8(ascii: ","))
      guard take(UInt8(ascii: "}")), let major = parts.0, let minor = parts.1, let patch = parts.2 else {
        return nil
      }
      return SemanticVersion(major, minor, patch, prerelease: prerelease)
    }
  }
}

/// Each value's raw value as bytes, made once, for matching without making a String.
private func table<E: CaseIterable & RawRepresentable>(_: E.Type) -> [([UInt8], E)]
where E.RawValue == String {
  E.allCases.map { (Array($0.rawValue.utf8), $0) }
}
private let moduleTypes = table(ModuleType.self)
private let platformNames = table(Platform.self)
private let capabilityNames = table(Capability.self)
private let roleNames = table(DefaultModuleRole.self)

extension UnsafeBufferPointer where Element == UInt8 {
  /// Whether these bytes are exactly `s`'s UTF-8.
  fileprivate func equals(_ s: StaticString) -> Bool {
    guard count == s.utf8CodeUnitCount else { return false }
    guard let base = baseAddress else { return count == 0 }
    return memcmp(base, s.utf8Start, count) == 0
  }
}
