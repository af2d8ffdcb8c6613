import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// `forsetti-host trust FILE.pub --for licences|modules` and `trust --list`: installs a vendor's
/// public key in the directory of the role it is trusted for, or lists the keys by role.
enum TrustCommand {
  static let spec = CommandSpec(
    name: "trust",
    abstract: "Trust a vendor's public key for licences or for module signatures, or list the trusted keys.",
    discussion: """
      FORMS:
        trust FILE.pub --for licences   licences signed by this key unlock their products
        trust FILE.pub --for modules    modules signed by this key count as signed by a trusted vendor
        trust --list                    the keys of each role, and any trusted for nothing

      The key is checked (an Ed25519 public key as `forsetti-host keygen` writes NAME.pub) and
      written atomically, mode 0644, to STATE/trusted-keys/ROLE/NAME.pub; the same key already
      there is left as it is, a different key of that name is refused. A running host on STATE
      applies it at once. A key is trusted for a role only in that role's directory: one directly
      in STATE/trusted-keys/ is trusted for nothing (the host warns of it). Trusting a key for
      modules does not make signatures required: `--require-signatures` on run, dev, check, list
      and explain does.

      --json prints {"file","role","keyID","installed","result"} (result installed or
      alreadyTrusted); with --list, {"stateDirectory","licences":[…],"modules":[…],"roleless":[…]},
      each key {"file","keyID"} (keyID null for a file that is not a key, which is ignored).

      EXIT STATUS: 0 done, 2 usage error, a file that is not a key, or a conflicting name.
      """,
    options: [
      .value("for", "licences|modules", "The role the key is trusted for."),
      .flag("list", "List the trusted keys by role."),
      .state("State directory whose trusted-keys/ to use."),
      .flag("json", "Print the result as JSON."),
    ],
    positionals: [PositionalSpec("FILE.pub", "The vendor's public key.", optional: true)])

  static func run(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let state = p.stateDirectory
    if p.flag("list") {
      if let extra = p.positionals.first { throw .usage(.unexpectedArgument(extra)) }
      if p.value("for") != nil { throw .usage(.unexpectedArgument("--for")) }
      console.out(listing(stateDirectory: state, json: p.flag("json")))
      return .success
    }
    guard let file = p.positionals.first else { throw .usage(.missingArgument("FILE.pub")) }
    guard let raw = p.value("for") else {
      throw .usage(.missingValue(option: "for", valueName: "licences|modules"))
    }
    guard let role = TrustRole(rawValue: raw) else {
      throw .usage(.invalidValue(option: "for", value: raw, why: "expected licences or modules"))
    }
    let key: [UInt8]
    do { key = try Signatures.readPublic(file) } catch {
      throw .configuration(
        .file(
          option: "trust", path: file,
          reason:
            "not a Forsetti public key (\(error)); give the vendor's NAME.pub as `forsetti-host keygen` writes it, never the secret NAME.key"
        ))
    }
    let keyID = Signatures.keyID(key)
    let name = PathText.name(file).hasSuffix(".pub") ? PathText.name(file) : PathText.name(file) + ".pub"
    let target: String
    let result: String
    do {
      let done = try TrustedKeys.install(key, name: name, role: role, stateDirectory: state)
      (target, result) = (done.path, done.result.rawValue)
    } catch {
      switch error {
      case .conflict(let path, let present):
        throw .configuration(
          .file(
            option: "trust", path: path,
            reason:
              "already holds \(present.map { "a different key, \($0)" } ?? "a file that is not a key"); remove it first if this key replaces it, or rename \(file) to trust both"
          ))
      case .lock(let e): throw .configuration(.file(option: "state", path: e.path, reason: e.description))
      case .write(let e): throw .configuration(.file(option: "state", path: e.path, reason: e.description))
      }
    }
    if p.flag("json") {
      console.out(
        JSONWriter.string(
          .object(
            JSONObject([
              ("file", .string(file)), ("role", .string(role.rawValue)), ("keyID", .string(keyID)),
              ("installed", .string(target)), ("result", .string(result)),
            ])), pretty: true) + "\n")
    } else {
      let what =
        role == .licences ? "licences it signs unlock their products" : "modules it signs count as signed"
      console.out(
        result == "installed"
          ? "key \(keyID) trusted for \(role.rawValue): \(target) (\(what))\n"
          : "key \(keyID) was already trusted for \(role.rawValue): \(target)\n")
    }
    return .success
  }

  /// The keys of each role and those trusted for nothing, as text or JSON.
  static func listing(stateDirectory state: String, json: Bool) -> String {
    let files = TrustedKeys.files(stateDirectory: state)
    func keys(_ role: TrustRole?) -> [TrustedKeyFile] { files.filter { $0.role == role } }
    if json {
      func array(_ role: TrustRole?) -> JSONValue {
        .array(
          keys(role).map {
            .object(JSONObject([("file", .string($0.path)), ("keyID", .string(orNull: $0.keyID))]))
          })
      }
      return JSONWriter.string(
        .object(
          JSONObject([
            ("stateDirectory", .string(state)), ("licences", array(.licences)), ("modules", array(.modules)),
            ("roleless", array(nil)),
          ])), pretty: true) + "\n"
    }
    var out = ""
    for role in TrustRole.allCases {
      out += "\(role.rawValue) (\(TrustedKeys.directory(role, stateDirectory: state))/):"
      let list = keys(role)
      out += list.isEmpty ? " none\n" : "\n"
      for k in list {
        out += "  \(PathText.name(k.path))  \(k.keyID.map { "key \($0)" } ?? "not a key (ignored)")\n"
      }
    }
    for k in keys(nil) {
      out += "warning: \(TrustedKeys.rolelessWarning(k.path, stateDirectory: state))\n"
    }
    return out
  }
}
