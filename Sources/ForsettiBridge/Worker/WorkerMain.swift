import CForsetti
import CForsettiSys
import ForsettiBinary
import ForsettiCore
import Glibc

/// The worker process: confine, load exactly one module, then serve it until the host says
/// stop or goes away. The host end of the socket is file descriptor 3.
public enum WorkerMain {
  public static let socketFD: Int32 = 3
  /// The synchronous-call channel: the shared-memory ring (`CallRing`) the host created.
  public static let callsFD: Int32 = 4

  public static func run(_ arguments: [String]) -> Int32 {
    let socket = WireSocket(fd: socketFD)
    // No worker outlives its host: die with the parent (checked below to still be the host).
    _ = forsetti_set_parent_death_signal(SIGKILL)
    let configuration: WorkerConfiguration?
    switch arguments.first {
    case "--config" where arguments.count == 2:
      configuration = WorkerConfiguration(json: arguments[1])
    case "--await-config" where arguments.count == 1:
      // Started ahead of need: nothing of a module is known, loaded or confined until the host
      // says which module this is. A closed socket means the spare was not wanted.
      configuration = awaitConfiguration(socket)
    default:
      configuration = nil
    }
    guard let config = configuration else {
      let text = "forsetti-worker: started by hand? it is spawned by forsetti-host\n"
      _ = text.withCString { write(2, $0, strlen($0)) }
      return 64
    }
    guard getppid() == config.parent else { return 70 }

    let report: ConfinementReport
    switch Confinement.apply(config.policy) {
    case .failure(let e):
      socket.send(
        WireFrame(
          .loadFailed, [.string(ReasonCode.loadFailed.rawValue), .string("confinement failed: \(e)")]))
      return 71
    case .success(let r): report = r
    }
    // Credentials changed: the parent-death signal is set again, and the parent checked again in
    // case the host died in between.
    _ = forsetti_set_parent_death_signal(SIGKILL)
    guard getppid() == config.parent else { return 70 }
    var confined = JSONObject([
      ("capabilitiesDropped", .bool(report.capabilitiesDropped)), ("namespaces", .strings(report.namespaces)),
      ("landlockABI", report.landlockABI.map { .number(String($0)) } ?? .null),
      ("signalsScoped", .bool(report.signalsScoped)),
      ("seccomp", .bool(report.seccomp)), ("seccompCalls", .number(String(report.seccompCalls))),
      ("memoryBypassesRefused", .bool(report.memoryBypassesRefused)), ("missing", .strings(report.missing)),
    ])
    confined["threadsBeforeConfinement"] = .number(String(report.threadsBefore))
    socket.send(WireFrame(.confined, [.string(JSONWriter.string(.object(confined)))]))

    let loaded: LoadedModule
    switch DynamicLoader().load(path: config.library, entryPoint: config.entryPoint, isSwift: config.isSwift)
    {
    case .failure(let e):
      socket.send(WireFrame(.loadFailed, [.string(e.reason.rawValue), .string(e.description)]))
      return 0
    case .success(let l): loaded = l
    }
    let ui: UIContributions?
    switch ModuleTableReader.uiContributions(loaded) {
    case .failure(let e):
      socket.send(WireFrame(.loadFailed, [.string(e.reason.rawValue), .string(e.description)]))
      return 0
    case .success(let c): ui = c
    }
    socket.send(WireFrame(.loaded, [.string(JSONWriter.string(WorkerCodec.loaded(loaded.descriptor, ui)))]))

    guard let ring = CallRing.attach(fd: callsFD) else {
      socket.send(
        WireFrame(
          .loadFailed, [.string(ReasonCode.loadFailed.rawValue), .string("the host call ring is not mapped")])
      )
      return 0
    }
    let link = WorkerLink(socket: socket, calls: ring)
    guard DetachedThread.start({ link.readLoop() }) else {
      socket.send(
        WireFrame(
          .loadFailed, [.string(ReasonCode.loadFailed.rawValue), .string("no thread for the host link")]))
      return 0
    }

    guard let start = link.commands.next(timeout: nil), start.kind == .start else { return 0 }
    let binding: ModuleBinding
    do {
      binding = try ModuleBinding(
        moduleID: config.moduleID, granted: config.granted, sandbox: config.sandbox, backend: link)
    } catch {
      socket.send(WireFrame(.startResult, [.int(Int64(FORSETTI_ERR_START_FAILED)), .string("\(error)")]))
      return 0
    }
    let t = loaded.table.pointee
    let status = t.start?(t.`self`, binding.hostTable) ?? FORSETTI_ERR_START_FAILED
    if status == FORSETTI_OK, let state = start.bytes(0), !state.isEmpty {
      _ = StateTransfer.restore(loaded.table, state)
    }
    socket.send(WireFrame(.startResult, [.int(Int64(status))]))
    guard status == FORSETTI_OK else { return 0 }

    while let cmd = link.commands.next(timeout: nil) {
      if cmd.kind == .saveState {
        socket.send(WireFrame(.stateSaved, id: cmd.id, [.bytes(StateTransfer.save(loaded.table) ?? [])]))
      }
      if cmd.kind == .stop {
        t.stop?(t.`self`)
        binding.revoke()
        socket.send(WireFrame(.stopped))
        // Skip atexit handlers and destructors: the module's work ends with the process.
        _exit(0)
      }
    }
    return 0
  }
}

extension WorkerMain {
  /// The configuration in the first frame from the host, if it is a `configure` frame.
  static func awaitConfiguration(_ socket: WireSocket) -> WorkerConfiguration? {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Wire.maxFrame, alignment: 8)
    defer { buffer.deallocate() }
    guard case .frame(let f) = socket.receive(into: buffer), f.kind == .configure, let json = f.string(0)
    else {
      return nil
    }
    return WorkerConfiguration(json: json)
  }
}

/// JSON forms of what crosses from worker to host in lifecycle frames.
package enum WorkerCodec {
  package static func loaded(_ d: ModuleDescriptor, _ ui: UIContributions?) -> JSONValue {
    var o = JSONObject([
      ("moduleID", .string(d.moduleID)), ("moduleType", .string(d.moduleType.rawValue)),
      ("version", .string(d.moduleVersion.description)),
    ])
    if let ui {
      o["toolbarItems"] = .array(
        ui.toolbarItems.map {
          .object(
            JSONObject([
              ("itemID", .string($0.itemID)), ("title", .string($0.title)),
              ("actionRouteID", .string(orNull: $0.actionRouteID)),
            ]))
        })
      o["viewInjections"] = .array(
        ui.viewInjections.map {
          .object(
            JSONObject([
              ("viewID", .string($0.viewID)), ("slotID", .string($0.slotID)),
              ("priority", .number(String($0.priority))),
            ]))
        })
      o["routes"] = .strings(ui.overlay?.routes ?? [])
      o["pointers"] = .strings(ui.overlay?.pointers ?? [])
      if let t = ui.themeMask {
        o["themeMask"] = .object(
          JSONObject([
            ("themeID", .string(t.themeID)),
            (
              "tokens",
              .object(JSONObject(t.tokens.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))
            ),
          ]))
      }
    }
    return .object(o)
  }

  /// The host's reading of a `loaded` frame: untrusted, so every field is checked.
  package static func decodeLoaded(_ text: String) -> (ModuleDescriptor, UIContributions?)? {
    guard let o = (try? JSONParser.parse(text))?.objectValue, let id = o["moduleID"]?.stringValue,
      let type = o["moduleType"]?.stringValue.flatMap(ModuleType.init(rawValue:)),
      let version = o["version"]?.stringValue.flatMap(SemanticVersion.init(parsing:))
    else { return nil }
    let d = ModuleDescriptor(moduleID: id, moduleType: type, moduleVersion: version)
    guard o["toolbarItems"] != nil || o["viewInjections"] != nil || o["themeMask"] != nil else {
      return (d, nil)
    }
    var ui = UIContributions()
    for case .object(let t) in o["toolbarItems"]?.arrayValue ?? [] {
      guard let i = t["itemID"]?.stringValue, let title = t["title"]?.stringValue else { return nil }
      ui.toolbarItems.append(
        ToolbarItem(itemID: i, title: title, actionRouteID: t["actionRouteID"]?.stringValue))
    }
    for case .object(let v) in o["viewInjections"]?.arrayValue ?? [] {
      guard let i = v["viewID"]?.stringValue, let s = v["slotID"]?.stringValue,
        let p = v["priority"]?.integerValue
      else { return nil }
      ui.viewInjections.append(ViewInjection(viewID: i, slotID: s, priority: p))
    }
    let routes = o["routes"]?.arrayValue?.compactMap(\.stringValue) ?? []
    let pointers = o["pointers"]?.arrayValue?.compactMap(\.stringValue) ?? []
    if !routes.isEmpty || !pointers.isEmpty { ui.overlay = OverlaySchema(routes: routes, pointers: pointers) }
    if let t = o["themeMask"]?.objectValue, let tid = t["themeID"]?.stringValue {
      var tokens: [String: String] = [:]
      for (k, v) in t["tokens"]?.objectValue?.members ?? [] { tokens[k] = v.stringValue ?? "" }
      ui.themeMask = ThemeMask(themeID: tid, tokens: tokens)
    }
    return (d, ui)
  }
}
