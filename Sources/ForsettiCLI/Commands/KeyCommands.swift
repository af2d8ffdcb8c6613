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
      "A host trusts a vendor by copying NAME.pub into STATE/trusted-keys/; from then on it refuses unsigned or altered modules.",
    positionals: [PositionalSpec("NAME", "Path prefix of the two files.")])

  static let signSpec = CommandSpec(
    name: "sign",
    abstract: "Sign a module binary: writes FILE.so.sig, a detached signature over the file's exact bytes.",
    options: [.value("key", "FILE", "The secret key (NAME.key).")],
    positionals: [PositionalSpec("FILE.so", "The binary to sign.")])

  static let verifySpec = CommandSpec(
    name: "verify", abstract: "Check a module binary's signature against the trusted keys.",
    discussion: "EXIT STATUS: 0 signed by a trusted key, 1 unsigned or invalid, 2 usage error.",
    options: [.value("state", "DIR", "State directory whose trusted-keys/ to use.", default: ".forsetti")],
    positionals: [PositionalSpec("FILE.so", "The binary to check.")])

  static let licenceSpec = CommandSpec(
    name: "licence", abstract: "Issue a signed licence (vendors): prints it as JSON, or writes --out.",
    discussion:
      "Install it as STATE/licences/NAME.licence on the host; the vendor's NAME.pub goes to STATE/trusted-keys/.",
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
    let keys = Signatures.trustedKeys(
      in: PathText.join(p.value("state") ?? ".forsetti", "trusted-keys"))
    switch ModuleSignature.verify(p.positionals[0], trusted: keys) {
    case .valid(let k):
      console.out("\(p.positionals[0]): signed by trusted key \(k)\n")
      return .success
    case .unsigned:
      console.out("\(p.positionals[0]): unsigned (no \(ModuleSignature.path(for: p.positionals[0])))\n")
      return .blocked
    case .invalid(let why):
      console.out("\(p.positionals[0]): signatureInvalid: \(why)\n")
      return .blocked
    }
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
