/// The stable reason codes of DESIGN.md, used verbatim in JSON output and tests.
public enum ReasonCode: String, Sendable, Hashable, CaseIterable, Codable {
  // Discovery and manifest.
  case validationFailed
  case invalidJSON
  case duplicateModuleID
  // Compatibility.
  case invalidSchemaVersion
  case invalidManifestTemplateVersion
  case unsupportedPlatform
  case unsupportedForsettiVersion
  case capabilityDenied
  // Trust.
  case approvalPending
  case moduleLocked
  // Activation.
  /// Eligible but not running: disabled by the operator, or neither enabled nor unlocked
  /// explicitly under `--default-policy deny`. Not a failure.
  case moduleDisabled
  /// Eligible and enabled but not running: a UI or app module other than the one selected (or
  /// none is selected). Not a failure.
  case uiNotSelected
  // Runtime requirements, identity and UI.
  case unsatisfiedRuntimeRequirement
  case missingCapability
  case moduleIdentityMismatch
  // Module communication.
  case moduleCommunicationDenied
  case moduleIdentitySpoofingDenied
  // Binary inspection, loading and supervision.
  case binaryNotFound
  case ambiguousEntryPoint
  case invalidBinary
  case architectureMismatch
  /// The loader could not load the binary here: a library of its closure missing, or a symbol
  /// version it needs not defined by the library found (`BinaryCompatibility`).
  case binaryIncompatible
  case entryPointMissing
  case abiUnsupported
  case unsigned
  case signatureInvalid
  case loadFailed
  case startFailed
  case startTimedOut
  case crashed
  /// The worker broke the host–worker protocol (a frame not valid in its state, or malformed).
  case protocolViolation
  case quarantined
}
