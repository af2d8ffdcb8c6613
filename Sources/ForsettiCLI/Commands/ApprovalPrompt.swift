import ForsettiCore
import ForsettiRuntime
import Glibc

/// On a terminal, `run` asks for the capabilities a module still needs approved. Anywhere else
/// (CI, a pipe, no standard input) it never asks and never waits: those modules stay
/// `approvalPending`.
enum ApprovalPrompt {
  static func ask(_ manifests: [ModuleManifest], options: HostOptions, console: Console)
    throws(CommandFailure)
  {
    guard isatty(0) == 1, isatty(2) == 1 else { return }
    let store = ApprovalStore(stateDirectory: options.judging.stateDirectory)
    let ledger: ApprovalLedger
    do { ledger = try store.load() } catch {
      throw .configuration(.file(option: "state", path: store.path, reason: error.description))
    }
    for m in manifests {
      let d = ApprovalRules.evaluate(requested: m.capabilitySet, approved: ledger.approved[m.moduleID])
      guard !d.pending.isEmpty else { continue }
      let list = d.pending.sorted().map(\.rawValue).joined(separator: ", ")
      let what = d.firstRun ? "asks for" : "now also asks for"
      console.err("\(m.displayName) (\(m.moduleID) \(m.moduleVersion)) \(what): \(list). Approve? [y/N] ")
      guard let answer = readLine(strippingNewline: true) else { return }
      if answer.lowercased().hasPrefix("y") {
        do { _ = try store.approve(m.moduleID, d.pending) } catch {
          throw .configuration(.file(option: "state", path: store.path, reason: error.description))
        }
      }
    }
  }
}
