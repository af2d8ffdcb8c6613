import CForsetti
import ForsettiBinary
import ForsettiCore
import Foundation

/// Runs the lifecycle of in-process modules: load → identity and UI → start, in provider-first
/// order; stop in reverse. One module's failure is recorded against it and never stops others.
///
/// Used from one thread (the host's main thread): module `start` and `stop` are called there, as
/// forsetti.h promises.
public final class ModuleManager {
  public let environment: HostEnvironment
  private let loader: any ModuleLoading
  public private(set) var records: [ModuleRecord] = []
  private var running: [(record: Int, module: LoadedModule, binding: ModuleBinding)] = []
  private var contributions: [String: UIContributions] = [:]

  public init(environment: HostEnvironment, loader: any ModuleLoading = DynamicLoader()) {
    self.environment = environment
    self.loader = loader
  }

  /// The composed UI surface of the started modules.
  public var surface: Surface { Surface.compose(contributions) }

  /// Takes the gate stack's judgements, then loads and starts every module that passed.
  public func activate(_ judgements: [ModuleJudgement], index: BinaryIndex) {
    records = judgements.map { j in
      ModuleRecord(
        file: j.file, moduleID: j.moduleID, manifest: j.manifest, binaryPath: nil,
        state: j.passed ? .gated : .blocked(j.reason ?? .validationFailed), trace: j.trace, startDuration: nil
      )
    }
    let passing = records.indices.filter { records[$0].state == .gated }
    let byID = Dictionary(passing.compactMap { i in records[i].manifest.map { ($0.moduleID, i) } }) { a, _ in
      a
    }
    for m in StartOrder.order(passing.compactMap { records[$0].manifest }) {
      guard let i = byID[m.moduleID] else { continue }
      activate(record: i, manifest: m, index: index)
    }
    persist()
  }

  private func fail(_ i: Int, _ step: GateStep, _ reason: ReasonCode, _ detail: String) {
    records[i].trace.fail(step, reason, detail)
    records[i].trace.skipRemaining(because: "not evaluated: \(step.rawValue) failed with \(reason.rawValue)")
    records[i].state = .failed(reason)
    environment.log.write(
      LogRecord(
        level: .error, moduleID: records[i].moduleID,
        message: "\(reason.rawValue) at \(step.rawValue): \(detail)"))
  }

  private func activate(record i: Int, manifest m: ModuleManifest, index: BinaryIndex) {
    guard case .success(let facts) = index.locate(entryPoint: m.entryPoint) else {
      fail(i, .load, .binaryNotFound, "the binary exporting \(m.entryPoint) is gone since inspection")
      return
    }
    records[i].binaryPath = facts.path
    let isSwift = facts.neededLibraries.contains { $0.hasPrefix("libswiftCore") }
    let loaded: LoadedModule
    switch loader.load(path: facts.path, entryPoint: m.entryPoint, isSwift: isSwift) {
    case .failure(let e):
      fail(i, .load, e.reason, e.description)
      return
    case .success(let l): loaded = l
    }
    records[i].state = .loaded
    records[i].trace.pass(
      .load,
      "loaded \(facts.path) (module ABI \(ABIVersion.describe(loaded.table.pointee.abi_version))\(isSwift ? ", Swift image kept mapped" : ""))"
    )

    if case .fail(let v) = IdentityRules.check(m, loaded.descriptor) {
      fail(i, .identityAndUI, v.reason, v.detail)
      return
    }
    var ui = UIContributions()
    switch ModuleTableReader.uiContributions(loaded) {
    case .failure(let e):
      fail(i, .identityAndUI, e.reason, e.description)
      return
    case .success(let c): ui = c ?? UIContributions()
    }
    if case .fail(let v) = UIContributionRules.check(m, ui) {
      fail(i, .identityAndUI, v.reason, v.detail)
      return
    }
    records[i].trace.pass(
      .identityAndUI,
      "descriptor agrees (\(m.moduleID) \(m.moduleType.rawValue) \(m.moduleVersion)); \(Self.describe(ui))")

    let binding: ModuleBinding
    do {
      binding = try ModuleBinding(moduleID: m.moduleID, granted: m.capabilitySet, environment: environment)
    } catch {
      fail(i, .start, .startFailed, "could not prepare the module's context: \(error)")
      return
    }
    let clock = ContinuousClock()
    let began = clock.now
    let status =
      loaded.table.pointee.start?(loaded.table.pointee.`self`, binding.hostTable) ?? FORSETTI_ERR_START_FAILED
    let took = clock.now - began
    guard status == FORSETTI_OK else {
      binding.revoke()
      fail(i, .start, .startFailed, "start returned \(StatusName.of(status))")
      return
    }
    records[i].state = .started
    records[i].startDuration = took
    records[i].trace.pass(
      .start, "started in \(took.formatted(.units(allowed: [.milliseconds, .microseconds], width: .narrow)))")
    running.append((i, loaded, binding))
    if m.moduleType.isVisual && !ui.isEmpty { contributions[m.moduleID] = ui }
    environment.hostLog(.info, "started \(m.moduleID) \(m.moduleVersion)")
  }

  static func describe(_ c: UIContributions) -> String {
    if c.isEmpty { return "no UI contributions" }
    var parts: [String] = []
    if !c.toolbarItems.isEmpty { parts.append("\(c.toolbarItems.count) toolbar item(s)") }
    if !c.viewInjections.isEmpty { parts.append("\(c.viewInjections.count) view injection(s)") }
    if let o = c.overlay { parts.append("\(o.routes.count) route(s), \(o.pointers.count) pointer(s)") }
    if let t = c.themeMask {
      parts.append("theme mask \(t.themeID) (validated; stripped before publication)")
    }
    return parts.joined(separator: ", ") + " accepted"
  }

  /// Stops every started module in reverse start order, revoking each one's host functions.
  public func stopAll() {
    while let last = running.popLast() {
      let t = last.module.table.pointee
      t.stop?(t.`self`)
      last.binding.revoke()
      contributions[last.binding.moduleID] = nil
      records[last.record].state = .stopped
      environment.hostLog(.info, "stopped \(last.binding.moduleID)")
    }
    persist()
  }

  /// The bindings of started modules, by ID (tests use them to prove revocation).
  public var bindings: [String: ModuleBinding] {
    Dictionary(running.map { ($0.binding.moduleID, $0.binding) }) { a, _ in a }
  }

  /// Writes `runtime.json` and `surface.json` so other invocations (`list`, `surface`) can see
  /// what this host is doing.
  private func persist() {
    let state = RuntimeStateFile(pid: getpid(), records: records, surface: surface)
    let dir = environment.stateDirectory
    do {
      try AtomicFile.write(
        Array(JSONWriter.string(state.runtimeJSON, pretty: true).utf8), to: RuntimeStateFile.runtimePath(dir))
      try AtomicFile.write(
        Array(JSONWriter.string(state.surfaceJSON, pretty: true).utf8), to: RuntimeStateFile.surfacePath(dir))
    } catch {
      environment.hostLog(.warning, "could not save runtime state: \(error)")
    }
  }
}

/// Names of forsetti.h status codes, for messages.
public enum StatusName {
  public static func of(_ s: Int32) -> String {
    switch s {
    case FORSETTI_OK: "FORSETTI_OK"
    case FORSETTI_ERR_INVALID_ARGUMENT: "FORSETTI_ERR_INVALID_ARGUMENT"
    case FORSETTI_ERR_DENIED: "FORSETTI_ERR_DENIED"
    case FORSETTI_ERR_REVOKED: "FORSETTI_ERR_REVOKED"
    case FORSETTI_ERR_NOT_FOUND: "FORSETTI_ERR_NOT_FOUND"
    case FORSETTI_ERR_IO: "FORSETTI_ERR_IO"
    case FORSETTI_ERR_TOO_LARGE: "FORSETTI_ERR_TOO_LARGE"
    case FORSETTI_ERR_BUFFER_TOO_SMALL: "FORSETTI_ERR_BUFFER_TOO_SMALL"
    case FORSETTI_ERR_COMMUNICATION_DENIED: "FORSETTI_ERR_COMMUNICATION_DENIED"
    case FORSETTI_ERR_START_FAILED: "FORSETTI_ERR_START_FAILED"
    default: "status \(s)"
    }
  }
}
