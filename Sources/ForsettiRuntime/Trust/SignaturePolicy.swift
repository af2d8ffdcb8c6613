import ForsettiBinary
import ForsettiCore

/// The signature part of step 2: what a `SignatureFinding` means for a module, given whether the
/// operator requires signed modules (`--require-signatures`). Without it only a signature by a
/// key trusted for modules that does not match the bytes refuses (someone changed a signed
/// binary); with it anything but a matching signature by such a key refuses.
package struct SignaturePolicy: Sendable, Hashable {
  package var required: Bool
  /// Key IDs trusted for licences only: named when such a key signed a module, the likely
  /// mistake being a key installed for the wrong role.
  package var licenceKeyIDs: Set<String>
  /// `STATE/trusted-keys/modules`, for the remedies.
  package var modulesDirectory: String

  package init(required: Bool, licenceKeyIDs: Set<String> = [], modulesDirectory: String) {
    self.required = required
    self.licenceKeyIDs = licenceKeyIDs
    self.modulesDirectory = modulesDirectory
  }

  /// The outcome for `binary` and what the pass line adds (empty on failure).
  package func judge(_ finding: SignatureFinding, binary: String) -> (outcome: GateOutcome, note: String) {
    let sig = ModuleSignature.path(for: binary)
    let notRequired = "signatures not required"
    switch finding {
    case .valid(let k):
      return (.pass, "signed by trusted key \(k)\(required ? " (signatures required)" : "")")
    case .mismatch(let k):
      return (
        .fail(
          .init(
            .signatureInvalid,
            "the signature by trusted key \(k) (\(sig)) does not match the file's bytes (changed since signing?); reinstall the vendor's files or sign it again with `forsetti-host sign`"
          )), ""
      )
    case .unreadable:
      return (.fail(.init(.signatureInvalid, "\(binary) cannot be read to check its signature")), "")
    case .unsigned:
      guard required else { return (.pass, "unsigned (\(notRequired))") }
      return (
        .fail(
          .init(
            .unsigned,
            "\(binary) has no signature (\(sig)) and this host requires signed modules (--require-signatures); sign it with `forsetti-host sign`"
          )), ""
      )
    case .malformed(let why):
      guard required else { return (.pass, "\(why); not checked (\(notRequired))") }
      return (
        .fail(.init(.signatureInvalid, "\(why); this host requires signed modules (--require-signatures)")),
        ""
      )
    case .untrustedKey(let k):
      let role =
        licenceKeyIDs.contains(k)
        ? "trusted for licences only" : "not trusted for module signatures here (\(modulesDirectory)/)"
      guard required else {
        return (.pass, "signed by an untrusted key (\(notRequired)): key \(k) is \(role)")
      }
      return (
        .fail(
          .init(
            .signatureInvalid,
            "signed by key \(k), which is \(role), and this host requires signed modules (--require-signatures); if you trust this vendor for modules: `forsetti-host trust VENDOR.pub --for modules`"
          )), ""
      )
    }
  }
}
