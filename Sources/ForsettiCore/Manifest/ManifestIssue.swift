/// One thing wrong with a manifest: the field (a JSON path such as `moduleVersion.major` or
/// `capabilitiesRequested[2]`) and the problem, with the offending value.
public struct ManifestIssue: Sendable, Hashable, CustomStringConvertible {
  public var field: String
  public var problem: Problem

  public init(field: String, problem: Problem) {
    self.field = field
    self.problem = problem
  }

  public enum Problem: Sendable, Hashable {
    case missingField
    case wrongType(expected: String, found: String)
    /// A string outside its enumeration (module type, capability, platform, role, I/O kind …).
    case unknownValue(String, allowed: [String])
    case malformedVersion(String)
    case invalidModuleID(String)
    case reservedNamespace(String)
    case invalidEntryPoint(String)
    case blank
    case duplicateValue(String)
    case emptyList
    case maxBelowMin(min: SemanticVersion, max: SemanticVersion)
    case notAllowed(String)
    /// A `defaultModuleRole` held by a module type the role is not for.
    case roleNotForModuleType(DefaultModuleRole, ModuleType)
    /// A value (a role, an I/O kind) that needs a capability missing from capabilitiesRequested;
    /// `orRemove` names what to remove instead of adding the capability.
    case capabilityNotRequested(value: String, capability: Capability, orRemove: String)
    /// A string holding `scalar` (at scalar `offset`), which the module-text rule escapes.
    case controlCharacter(String, scalar: Unicode.Scalar, offset: Int)
  }

  /// The field, the problem and the value quoted, every character of the module-text rule
  /// escaped: the value is the manifest's text, and the message goes to terminals and logs.
  public var description: String { "\(ModuleText.visible(field)): \(problemText)" }

  /// The problem in words, without the field.
  public var problemText: String {
    switch problem {
    case .missingField:
      return "required field is missing"
    case .wrongType(let expected, let found):
      return "expected \(expected), found \(found)"
    case .unknownValue(let value, let allowed):
      var text =
        "unknown value \"\(ModuleText.visible(value))\" (expected one of \(allowed.joined(separator: ", ")))"
      if let s = Suggestion.closest(to: value, among: allowed) { text += "; did you mean \"\(s)\"?" }
      return text
    case .malformedVersion(let why):
      return "malformed version: \(ModuleText.visible(why))"
    case .invalidModuleID(let id):
      return
        "\"\(ModuleText.visible(id))\" is not a reverse-DNS ID (letters and digits in two or more dot-separated parts, e.g. com.vendor.module)"
    case .reservedNamespace(let id):
      return
        "\"\(ModuleText.visible(id))\" uses the reserved \"forsetti.\" namespace, which belongs to the host"
    case .invalidEntryPoint(let name):
      return
        "\"\(ModuleText.visible(name))\" is not a valid C identifier (letters, digits and _, not starting with a digit)"
    case .blank:
      return "must not be empty or blank"
    case .duplicateValue(let v):
      return "\"\(ModuleText.visible(v))\" is listed more than once"
    case .emptyList:
      return "must list at least one value"
    case .maxBelowMin(let min, let max):
      return "maximum \(max) is below the minimum \(min)"
    case .notAllowed(let why):
      return ModuleText.visible(why)
    case .roleNotForModuleType(let role, let type):
      let types = role.validModuleTypes.map(\.rawValue).sorted().joined(separator: " or ")
      let roles = DefaultModuleRole.allCases.filter { $0.validModuleTypes.contains(type) }.map {
        "\"\($0.rawValue)\""
      }
      return
        "\"\(role.rawValue)\" is a role for \(types) modules and this is \(type == .app ? "an" : "a") \(type.rawValue) module: remove defaultModuleRole, or use \(roles.count == 1 ? "" : "one of ")\(roles.joined(separator: ", "))"
    case .controlCharacter(let text, let scalar, let offset):
      return
        "\"\(ModuleText.visible(text))\" holds \(ModuleText.visible(String(scalar))) at character \(offset + 1), a control, separator or bidirectional character that would move a terminal's cursor, start a line of its own or reorder the text around it: remove it"
    case .capabilityNotRequested(let value, let cap, let orRemove):
      return
        "\"\(ModuleText.visible(value))\" needs capability \(cap.rawValue) in capabilitiesRequested: add \"\(cap.rawValue)\" there, or remove \(orRemove)"
    }
  }
}

/// Why a JSON document is not a valid manifest: every issue found, in field order.
public struct ManifestValidationError: Error, Sendable, Hashable, CustomStringConvertible {
  public var issues: [ManifestIssue]

  public var description: String { issues.map(\.description).joined(separator: "; ") }
}
