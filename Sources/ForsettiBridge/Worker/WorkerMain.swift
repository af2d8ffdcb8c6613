import CForsetti
import CForsettiSys
import ForsettiBinary
import ForsettiCore
import Glibc

/// The worker process: confine, load exactly one module, then serve it until the host says
/// stop or goes away. The host end of the socket is file descriptor 3.
///
/// This is the worker's half of the protocol. The frames both halves exchange, in the only
/// order they may come, are tabled once, at the top of the host's half
/// (`Sources/ForsettiRuntime/Isolation/WorkerProtocol.swift`), whose sections mirror the ones
/// marked here.
public enum WorkerMain {
  public static let socketFD: Int32 = 3
  /// The synchronous-call channel: the shared-memory ring (`CallRing`) the host created.
  public static let callsFD: Int32 = 4
  /// The exit status of a worker whose host speaks another protocol (sysexits' EX_PROTOCOL).
  public static let protocolMismatchStatus: Int32 = 76

  public static func run(_ arguments: [String]) -> Int32 {
    let socket = WireSocket(fd: socketFD)
    // No worker outlives its host: die with the parent (checked below to still be the host).
    _ = forsetti_set_parent_death_signal(SIGKILL)

    // MARK: Await the configuration (host: Configure)
    let text: String?
    // The eventfd the host's loop waits on for this worker's calls (sent with the configuration).
    var doorbell: Int32 = -1
    switch arguments.first {
    case "--config" where arguments.count == 2:
      text = arguments[1]
    case "--await-config" where arguments.count == 1:
      // Started ahead of need: nothing of a module is known, loaded or confined until the host
      // says which module this is. A closed socket means the spare was not wanted.
      text = awaitConfiguration(socket, doorbell: &doorbell)
    default:
      text = nil
    }
    // Parsed once: the version is read before the rest, which only a host of this build may mean.
    let payload = text.flatMap { try? JSONParser.parse($0) }
    guard let payload, let hostVersion = ProtocolVersion.of(payload) else { return startedByHand() }
    // Before anything is read further, confined or loaded: a host of another build may mean
    // something else by any frame from here on.
    guard hostVersion == ProtocolVersion.current else {
      let why = ProtocolVersion.mismatch(worker: ProtocolVersion.current, host: hostVersion)
      socket.send(WireFrame(.loadFailed, [.string(ReasonCode.loadFailed.rawValue), .string(why)]))
      return protocolMismatchStatus
    }
    guard let config = WorkerConfiguration(parsed: payload) else { return startedByHand() }
    guard getppid() == config.parent else { return 70 }
    // Before anything of a module runs, while this is the process's only thread: exactly the
    // environment the host chose, nothing of what this process (or the zygote) started with.
    adopt(config.environment)
    // Into its own cgroup, by itself, before anything of a module runs (`cgroupTasks`).
    if let failed = joinCgroup(config.cgroupTasks) {
      socket.send(
        WireFrame(
          .loadFailed,
          [.string(ReasonCode.loadFailed.rawValue), .string("could not join its cgroup: \(failed)")]))
      return 71
    }

    // MARK: Confine (host: Confined, loaded)
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
    let confined = JSONObject(
      [(ProtocolVersion.member, .number(String(ProtocolVersion.current)))] + report.json)
    socket.send(WireFrame(.confined, [.string(JSONWriter.string(.object(confined)))]))

    // MARK: Load (host: Confined, loaded)
    // The ring first: its last pages hold the crash record, armed before any code of the module
    // runs (its constructors run inside dlopen).
    guard let ring = CallRing.attach(fd: callsFD, doorbell: doorbell) else {
      socket.send(
        WireFrame(
          .loadFailed, [.string(ReasonCode.loadFailed.rawValue), .string("the host call ring is not mapped")])
      )
      return 0
    }
    if let record = ring.crashRecord {
      _ = forsetti_crash_arm(record)
      forsetti_crash_note_objects()
    }
    let loaded: LoadedModule
    switch DynamicLoader().load(path: config.library, entryPoint: config.entryPoint, isSwift: config.isSwift)
    {
    case .failure(let e):
      socket.send(WireFrame(.loadFailed, [.string(e.reason.rawValue), .string(e.description)]))
      return 0
    case .success(let l): loaded = l
    }
    forsetti_crash_note_objects()
    let ui: UIContributions?
    switch ModuleTableReader.uiContributions(loaded) {
    case .failure(let e):
      socket.send(WireFrame(.loadFailed, [.string(e.reason.rawValue), .string(e.description)]))
      return 0
    case .success(let c): ui = c
    }
    socket.send(WireFrame(.loaded, [.string(JSONWriter.string(WorkerCodec.loaded(loaded.descriptor, ui)))]))

    let link = WorkerLink(socket: socket, calls: ring)
    guard DetachedThread.start({ link.readLoop() }) else {
      socket.send(
        WireFrame(
          .loadFailed, [.string(ReasonCode.loadFailed.rawValue), .string("no thread for the host link")]))
      return 0
    }

    // MARK: Start (host: Start)
    guard let start = link.commands.next(timeout: nil), start.kind == .start else { return 0 }
    let binding: ModuleBinding
    do {
      binding = try ModuleBinding(
        moduleID: config.moduleID, granted: config.granted, serves: config.serves, calls: config.calls,
        sandbox: config.sandbox, backend: link)
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

    // MARK: Save state, stop (host: Save state, Stop); events and messages arrive meanwhile
    // on `link`'s reader thread (host: Run-time traffic)
    while let cmd = link.commands.next(timeout: nil) {
      // Only this thread answers, and only once `start` returned (host: Start).
      if cmd.kind == .confirmStart {
        socket.send(WireFrame(.startConfirmed, id: cmd.id))
      }
      if cmd.kind == .saveState {
        socket.send(WireFrame(.stateSaved, id: cmd.id, [.bytes(StateTransfer.save(loaded.table) ?? [])]))
      }
      if cmd.kind == .stop {
        // No call of another module may run in the handler during or after stop.
        link.stopServing()
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
  /// The configuration's JSON in the first frame from the host, if it is a `configure` frame.
  static func awaitConfiguration(_ socket: WireSocket, doorbell: inout Int32) -> String? {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Wire.maxFrame, alignment: 8)
    defer { buffer.deallocate() }
    var fd: Int32 = -1
    guard case .frame(let f) = socket.receive(into: buffer, descriptor: &fd), f.kind == .configure else {
      if fd >= 0 { close(fd) }
      return nil
    }
    doorbell = fd
    return f.string(0)
  }

  /// Moves the calling thread (the worker's only one) into each cgroup v1 `tasks` file given;
  /// what failed, if anything.
  package static func joinCgroup(_ tasks: [String]) -> String? {
    for path in tasks {
      let fd = open(path, O_WRONLY | O_CLOEXEC)
      guard fd >= 0 else { return "\(path): \(String(cString: strerror(errno)))" }
      let written = write(fd, "0", 1)
      let e = errno
      close(fd)
      guard written == 1 else { return "\(path): \(String(cString: strerror(e)))" }
    }
    return nil
  }

  /// Replaces the whole process environment with `environment`.
  static func adopt(_ environment: [String: String]) {
    clearenv()
    for (name, value) in environment { setenv(name, value, 1) }
  }

  /// Run without a host's configuration: says so, and exits 64 (EX_USAGE).
  static func startedByHand() -> Int32 {
    let text = "forsetti-worker: started by hand? it is spawned by forsetti-host\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    return 64
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
