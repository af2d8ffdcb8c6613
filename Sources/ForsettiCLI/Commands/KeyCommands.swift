import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// `keygen`, `sign`, `verify` and `licence`: Ed25519 keys for vendors and hosts.
enum KeyCommands {
  static let keygenSpec = CommandSpec(
    name: "keygen", abstract: "Make an Ed25519 key pair: NAME.key (secret, mode 0600) and NAME.pub.",
    discussion:
      "A host trusts a vendor's NAME.pub with `forsetti-host trust NAME.pub --for modules` (module signatures) or `--for licences` (licences it signs), each role on its own.",
    positionals: [PositionalSpec("NAME", "Path prefix of the two files.")])

  static let signSpec = CommandSpec(
    name: "sign",
    abstract: "Sign a module binary: writes FILE.so.sig, a detached signature over the file's exact bytes.",
    options: [.value("key", "FILE", "The secret key (NAME.key).")],
    positionals: [PositionalSpec("FILE.so", "The binary to sign.")])

  static let verifySpec = CommandSpec(
    name: "verify", abstract: "Check a module binary's signature against the keys trusted for modules.",
    discussion: """
      The keys are those in STATE/trusted-keys/modules/ (forsetti-host trust KEY --for modules); a
      key trusted for licences only does not count.

      --json prints {"file","signature","keyID","verifiedBy","result","finding","detail"}: the
      signature file's path, the key it names (null when none), the trusted key file that verified
      it (null unless valid), result valid | unsigned | untrustedKey | signatureInvalid, finding
      as in explain's signatures.finding, and the sentence the text form prints.

      EXIT STATUS: 0 signed by a trusted key, 1 unsigned or invalid, 2 usage error.
      """,
    options: [
      .state("State directory whose trusted-keys/modules/ to use."),
      .flag("json", "Print the result as JSON."),
    ],
    positionals: [PositionalSpec("FILE.so", "The binary to check.")])

  static let licenceSpec = CommandSpec(
    name: "licence", abstract: "Issue a signed licence (vendors): prints it as JSON, or writes --out.",
    discussion:
      "Install it as STATE/licences/NAME.licence on the host, and trust the vendor's key for licences: `forsetti-host trust NAME.pub --for licences`.",
    options: [
      .value("key", "FILE", "The vendor's secret key."), .value("product", "ID", "The product it unlocks."),
      .value("licensee", "NAME", "Who it is for."),
      .value("expires", "INSTANT", "ISO 8601, e.g. 2027-01-01T00:00:00Z."),
      .value("out", "FILE", "Write the licence here instead of printing it."),
    ])

  static func required(_ p: ParsedArguments, _ name: String, _ valueName: String) throws(CommandFailure)
    -> String
  {
    guard let v = p.value(name) else { throw .usage(.missingValue(option: name, valueName: valueName)) }
    return v
  }

  static func secret(_ path: String) throws(CommandFailure) -> [UInt8] {
    do { return try Signatures.readSecret(path) } catch {
      throw .configuration(.file(option: "key", path: path, reason: error.description))
    }
  }

  static func keygen(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let name = p.positionals[0]
    do {
      let (pk, sk) = try Signatures.generate()
      guard !FileManager.default.fileExists(atPath: name + ".key") else {
        throw CommandFailure.configuration(
          .file(option: "keygen", path: name + ".key", reason: "exists; refusing to overwrite a secret key"))
      }
      try AtomicFile.write(Array((Signatures.hex(sk) + "\n").utf8), to: name + ".key", mode: 0o600)
      try AtomicFile.write(Array((Signatures.hex(pk) + "\n").utf8), to: name + ".pub", mode: 0o644)
      console.out("key \(Signatures.keyID(pk)): \(name).key (secret), \(name).pub\n")
      return .success
    } catch let e as CommandFailure {
      throw e
    } catch {
      throw .configuration(.file(option: "keygen", path: name, reason: "\(error)"))
    }
  }

  static func sign(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let sk = try secret(try required(p, "key", "FILE"))
    do {
      let sig = try ModuleSignature.sign(p.positionals[0], secret: sk)
      console.out(
        "signed \(p.positionals[0]) with key \(Signatures.keyID(Signatures.publicKey(ofSecret: sk))): \(sig)\n"
      )
      return .success
    } catch {
      throw .configuration(.file(option: "sign", path: p.positionals[0], reason: "\(error)"))
    }
  }

  static func verify(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let state = p.stateDirectory
    let file = p.positionals[0]
    guard FileManager.default.fileExists(atPath: file) else {
      throw .configuration(.file(option: "verify", path: file, reason: "no such file; give the module's .so"))
    }
    let finding = SignatureFinding.read(
      binary: file, trusted: TrustedKeys.keys(.modules, stateDirectory: state))
    // What a host requiring signatures would say, so the sentence is the one explain prints.
    let policy = SignaturePolicy(
      required: true, licenceKeyIDs: Set(TrustedKeys.keys(.licences, stateDirectory: state).keys),
      modulesDirectory: TrustedKeys.directory(.modules, stateDirectory: state))
    let (outcome, note) = policy.judge(finding, binary: file)
    var verifiedBy: String?
    if case .valid(let k) = finding {
      verifiedBy =
        TrustedKeys.files(stateDirectory: state).first { $0.role == .modules && $0.keyID == k }?.path
    }
    let result =
      switch finding {
      case .valid: "valid"
      case .unsigned: "unsigned"
      case .untrustedKey: "untrustedKey"
      case .malformed, .mismatch, .unreadable: "signatureInvalid"
      }
    let detail = outcome.violation?.detail ?? note
    if p.flag("json") {
      var o = JSONObject([("file", .string(file)), ("signature", .string(ModuleSignature.path(for: file)))])
      o["keyID"] = .string(orNull: finding.keyID)
      o["verifiedBy"] = .string(orNull: verifiedBy)
      o["result"] = .string(result)
      o["finding"] = .string(finding.name)
      o["detail"] = .string(detail)
      console.out(JSONWriter.string(.object(o), pretty: true) + "\n")
    } else if let verifiedBy, let k = finding.keyID {
      console.out("\(file): signed by trusted key \(k) (\(verifiedBy))\n")
    } else {
      console.out("\(file): \(result): \(detail)\n")
    }
    return outcome.violation == nil ? .success : .blocked
  }

  static func licence(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let sk = try secret(try required(p, "key", "FILE"))
    let expires = try required(p, "expires", "INSTANT")
    guard Licence.parseTime(expires) != nil else {
      throw .usage(
        .invalidValue(
          option: "expires", value: expires, why: "expected an ISO 8601 instant such as 2027-01-01T00:00:00Z")
      )
    }
    let lic: Licence
    do {
      lic = try Licence.issue(
        productID: try required(p, "product", "ID"), licensee: try required(p, "licensee", "NAME"),
        expires: expires, secret: sk)
    } catch let e as CommandFailure {
      throw e
    } catch {
      throw .configuration(.file(option: "key", path: p.value("key") ?? "", reason: "\(error)"))
    }
    let text = JSONWriter.string(lic.json, pretty: true) + "\n"
    if let out = p.value("out") {
      do { try AtomicFile.write(Array(text.utf8), to: out) } catch {
        throw .configuration(.file(option: "out", path: out, reason: error.description))
      }
      console.out(
        "licence for \(lic.productID) (\(lic.licensee), until \(lic.expiresText)) written to \(out)\n")
    } else {
      console.out(text)
    }
    return .success
  }
}
