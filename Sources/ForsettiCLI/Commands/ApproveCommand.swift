import ForsettiCore
import ForsettiRuntime

/// `forsetti-host approve` and `revoke`: the user's decisions in STATE/approvals.json.
enum ApproveCommand {
  static let options: [OptionSpec] = [
    .value("capabilities", "CAP,CAP…", "Only these capabilities (default: all the manifest requests)."),
    .value("manifests", "DIR", "Where the module's manifest is.", default: "manifests"),
    .state("State directory."),
    .flag("json", "Print JSON instead of text."),
  ]

  static let approveSpec = CommandSpec(
    name: "approve", abstract: "Approve the capabilities a module requests (all, or --capabilities).",
    discussion:
      "Writes STATE/approvals.json atomically. An update that adds capabilities needs this again for the added ones.",
    options: options, positionals: [PositionalSpec("MODULE_ID", "The module to approve.")])

  static let revokeSpec = CommandSpec(
    name: "revoke", abstract: "Withdraw approval of a module's capabilities (all, or --capabilities).",
    options: options, positionals: [PositionalSpec("MODULE_ID", "The module.")])

  static func capabilities(_ p: ParsedArguments) throws(CommandFailure) -> Set<Capability>? {
    guard let raw = p.value("capabilities") else { return nil }
    var out = Set<Capability>()
    for name in raw.split(separator: ",").map(String.init) {
      guard let c = Capability(rawValue: name) else {
        let hint =
          Suggestion.closest(to: name, among: Capability.allCases.map(\.rawValue)).map {
            "; did you mean '\($0)'?"
          } ?? ""
        throw .usage(
          .invalidValue(option: "capabilities", value: raw, why: "unknown capability '\(name)'\(hint)"))
      }
      out.insert(c)
    }
    return out
  }

  static func approve(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let id = p.positionals[0]
    let store = ApprovalStore(stateDirectory: p.stateDirectory)
    let report: DiscoveryReport
    do {
      report = try ManifestDiscovery.discover(
        from: DirectoryManifestSource(root: p.value("manifests") ?? "manifests"))
    } catch {
      throw .configuration(.manifests(error))
    }
    guard let m = report.manifests.first(where: { $0.moduleID == id }) else {
      let hint =
        Suggestion.closest(to: id, among: report.manifests.map(\.moduleID)).map { "; did you mean '\($0)'?" }
        ?? ""
      throw .configuration(
        .file(
          option: "manifests", path: p.value("manifests") ?? "manifests",
          reason: "no manifest declares module \(id)\(hint)"))
    }
    let wanted = try capabilities(p) ?? m.capabilitySet
    let notRequested = wanted.subtracting(m.capabilitySet)
    guard notRequested.isEmpty else {
      throw .usage(
        .invalidValue(
          option: "capabilities", value: notRequested.sorted().map(\.rawValue).joined(separator: ","),
          why: "\(id) does not request these"))
    }
    do {
      let now = try store.approve(id, wanted)
      console.out(
        p.flag("json") ? JSONWriter.string(result(id, now)) + "\n" : "approved for \(id): \(list(now))\n")
    } catch { throw .configuration(.file(option: "state", path: store.path, reason: error.description)) }
    return .success
  }

  static func revoke(_ p: ParsedArguments, console: Console) throws(CommandFailure) -> ExitCode {
    let id = p.positionals[0]
    let store = ApprovalStore(stateDirectory: p.stateDirectory)
    do {
      let left = try store.revoke(id, try capabilities(p))
      console.out(
        p.flag("json")
          ? JSONWriter.string(result(id, left ?? [])) + "\n" : "approved for \(id) now: \(list(left ?? []))\n"
      )
    } catch let e as CommandFailure {
      throw e
    } catch {
      throw .configuration(.file(option: "state", path: store.path, reason: "\(error)"))
    }
    return .success
  }

  static func list(_ s: Set<Capability>) -> String {
    s.isEmpty ? "nothing" : s.sorted().map(\.rawValue).joined(separator: ", ")
  }

  static func result(_ id: String, _ s: Set<Capability>) -> JSONValue {
    .object(JSONObject([("moduleID", .string(id)), ("approved", .strings(s.sorted().map(\.rawValue)))]))
  }
}
