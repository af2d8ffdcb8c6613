import CForsetti
import Dispatch
import ForsettiBridge
import ForsettiCore
import Synchronization

/// Which module serves each default role now, and the one way to call it. A provider is entered
/// when its module installs a handler (`serve`) and withdrawn when it stops, crashes or is
/// replaced; a call finds the provider in force or fails at once with FORSETTI_ERR_UNAVAILABLE.
/// A withdrawn provider in a worker loses its channels too, so its consumers' next calls come
/// back to the registry.
/// Calls through the registry (to a provider in the host's process, or from one into a worker's
/// serve ring) take turns at the provider's `FairGate`: as many at once as an in-process
/// provider declared (one at a time into a serve ring, which has one slot; the worker then
/// queues them with its channels' calls), one queue per caller, each waiting at most its deadline.
final class RoleRegistry: Sendable {
  /// Where a provider's handler runs.
  enum Target: Sendable {
    /// In this process, on the caller's thread.
    case local(ModuleCallback<forsetti_role_handler>)
    /// In a worker, reached through its serve ring.
    case remote(RemoteProvider)
  }

  /// A provider in a worker.
  struct RemoteProvider: Sendable {
    /// One call through the worker's serve ring; the deadline is CLOCK_MONOTONIC nanoseconds.
    let call: @Sendable (RoleCall, _ deadline: UInt64) -> ServiceReply
    /// A channel of the named consumer's own (in the worker `owner`) to the worker: the
    /// provider's worker has been given its end, labelled with the consumer; the caller passes
    /// on the descriptor (and closes it). The host's `RoleChannels` keeps the ring.
    let connect:
      @Sendable (_ consumer: String, _ owner: ObjectIdentifier, _ progress: WorkerProgress?) -> (
        ring: ChannelRing, fd: Int32
      )?
    /// Closes the provider's ends of every channel: it serves the role no more, and its
    /// consumers' next calls must come to the host, which knows who serves it now.
    let disconnect: @Sendable () -> Void
    /// A call of the provider timed out (`why` says which): the host looks at its handlers'
    /// progress itself (`RoleChannels.suspect`).
    let suspect: @Sendable (_ why: String) -> Void
  }

  final class Provider: Sendable {
    let moduleID: String
    /// The module instance (its backend) that installed the handler: a late withdrawal by an
    /// instance already replaced must not remove its successor.
    let instance: UInt64
    let target: Target
    /// Held for the whole of one call; one instance keeps its gate when it installs another
    /// handler of the same concurrency, so calls stay within it across the change.
    let turn: FairGate

    init(moduleID: String, instance: UInt64, target: Target, turn: FairGate) {
      self.moduleID = moduleID
      self.instance = instance
      self.target = target
      self.turn = turn
    }

    func disconnect() {
      if case .remote(let remote) = target { remote.disconnect() }
    }

    func suspect(_ why: String) {
      if case .remote(let remote) = target { remote.suspect(why) }
    }
  }

  private let providers = Mutex<[DefaultModuleRole: Provider]>([:])
  private let warn: @Sendable (String, String) -> Void

  /// `warn(moduleID, line)` records a refusal against the module that caused it.
  init(warn: @escaping @Sendable (String, String) -> Void) { self.warn = warn }

  /// Installs (or, with nil, removes) the handler of the role `caller` holds; an in-process one
  /// runs `concurrency` calls at once (a worker's serve ring takes one at a time).
  func serve(_ caller: ModuleCaller, instance: UInt64, _ target: Target?, concurrency: Int = 1) -> Int32 {
    guard let role = caller.serves else {
      warn(
        caller.moduleID,
        "\(ReasonCode.moduleCommunicationDenied.rawValue): serve refused: the module holds no default role")
      return FORSETTI_ERR_DENIED
    }
    if let problem = RoleRules.serveProblem(caller, role) {
      warn(
        caller.moduleID,
        "\(ReasonCode.moduleCommunicationDenied.rawValue): serve \(role.rawValue) refused: \(problem)")
      return FORSETTI_ERR_DENIED
    }
    let (other, gone): (String?, Provider?) = providers.withLock { p in
      let old = p[role]
      if let old, old.moduleID != caller.moduleID { return (old.moduleID, nil) }
      if let target {
        let same = old?.instance == instance
        let slots: Int
        switch target {
        case .local: slots = max(1, concurrency)
        case .remote: slots = 1
        }
        let kept = same && old?.turn.slots == slots ? old?.turn : nil
        p[role] = Provider(
          moduleID: caller.moduleID, instance: instance, target: target, turn: kept ?? FairGate(slots: slots))
        // Another instance of the module (a reload) took over: the old one's channels go.
        return (nil, same ? nil : old)
      }
      guard let old, old.instance == instance else { return (nil, nil) }
      p[role] = nil
      return (nil, old)
    }
    gone?.disconnect()
    if let other {
      warn(
        caller.moduleID,
        "\(ReasonCode.moduleCommunicationDenied.rawValue): serve \(role.rawValue) refused: \(other) serves it already"
      )
      return FORSETTI_ERR_DENIED
    }
    return FORSETTI_OK
  }

  /// The role `number` names, if `caller` may call it (a refusal is logged against it).
  private func callable(_ number: Int64, by caller: ModuleCaller) -> Result<(DefaultModuleRole, Int), Refusal>
  {
    guard let index = Int(exactly: number), DefaultModuleRole.allCases.indices.contains(index) else {
      return .failure(Refusal(FORSETTI_ERR_INVALID_ARGUMENT))
    }
    let role = DefaultModuleRole.allCases[index]
    if let problem = RoleRules.callProblem(caller, role) {
      warn(
        caller.moduleID,
        "\(ReasonCode.moduleCommunicationDenied.rawValue): call of role \(role.rawValue) refused: \(problem)")
      return .failure(Refusal(FORSETTI_ERR_DENIED))
    }
    return .success((role, index))
  }

  /// A status a call is refused with before it reaches a provider.
  struct Refusal: Error {
    let status: Int32
    init(_ status: Int32) { self.status = status }
  }

  /// Calls the provider of the role `r.number` names for `caller`. The call's path (argument 2,
  /// `RolePath`) is the caller's claim: a role already on it is refused (a cycle), and the
  /// call gets no more time than the path's deadline leaves.
  func call(_ r: ServiceRequest, from caller: ModuleCaller) -> ServiceReply {
    let role: DefaultModuleRole
    let index: Int
    switch callable(r.number, by: caller) {
    case .failure(let refusal): return .status(refusal.status)
    case .success(let found): (role, index) = found
    }
    let path = RolePath(bytes: r.argument(2))
    guard !path.contains(index) else { return .status(FORSETTI_ERR_CALL_CYCLE) }
    // A C method name ends at its NUL; one inside could only come in a forged frame.
    guard let method = r.text(0), !method.isEmpty, !method.utf8.contains(0), let request = r.argument(1)
    else {
      return .status(FORSETTI_ERR_INVALID_ARGUMENT)
    }
    guard request.count <= RoleCall.maxPayload else { return .status(FORSETTI_ERR_TOO_LARGE) }
    guard let provider = providers.withLock({ $0[role] }) else { return .status(FORSETTI_ERR_UNAVAILABLE) }
    let deadline = path.deadlineFromNow()
    switch provider.turn.enter(caller.moduleID, until: deadline) {
    case .busy: return .status(FORSETTI_ERR_BUSY)
    case .expired:
      // Other calls held the turn that long: the provider's progress is looked at (in a worker).
      provider.suspect("\(caller.moduleID)'s call \"\(method)\" waited for its turn in vain")
      return .status(FORSETTI_ERR_TIMEOUT)
    case .entered: break
    }
    defer { provider.turn.leave() }
    guard CallRing.nanoseconds() < deadline else { return .status(FORSETTI_ERR_TIMEOUT) }
    // Withdrawn while this call waited its turn: it never reached the provider. Replaced by the
    // same instance's new handler (same turn): the new one answers.
    guard let current = providers.withLock({ $0[role] }), current.instance == provider.instance,
      current.turn === provider.turn
    else { return .status(FORSETTI_ERR_UNAVAILABLE) }
    let call = RoleCall(
      caller: caller.moduleID, method: method, request: request, capacity: r.capacity,
      path: RolePath(roles: path.roles, deadline: deadline))
    let reply: ServiceReply
    switch current.target {
    case .local(let handler): reply = call.run(handler, serving: index)
    case .remote(let remote): reply = remote.call(call, deadline)
    }
    if reply.status == FORSETTI_ERR_IO {
      warn(
        provider.moduleID,
        "role \(role.rawValue): the answer to \(caller.moduleID)'s call \"\(method)\" was malformed")
    }
    return reply
  }

  /// Where a consumer in a worker is to call the role `number` names (`roleConnect`).
  enum Route {
    /// On a channel of its own, straight to the provider's worker (module ID `provider`,
    /// `RoleChannel`); `open(owner, progress)` makes one for the consumer's worker `owner`
    /// (whose own page is `progress`), its ring and the descriptor to pass on, unless the caller
    /// has one already.
    case channel(
      DefaultModuleRole, provider: String,
      open: @Sendable (ObjectIdentifier, WorkerProgress?) -> (ring: ChannelRing, fd: Int32)?)
    /// Through the host (`roleCall`): the provider runs in the host's process.
    case relay
    /// Nowhere: the status the call gets.
    case refused(Int32)
  }

  /// How `caller`, a consumer in a worker, is to call the role `number` names. The checks are
  /// a call's own, made once: the two workers then talk without the host in between. A module's
  /// grant cannot change while it runs (a new grant is a new instance), and the host closes the
  /// channel when either module stops, after which the consumer asks again.
  func route(_ number: Int64, for caller: ModuleCaller) -> Route {
    switch callable(number, by: caller) {
    case .failure(let refusal): return .refused(refusal.status)
    case .success(let (role, _)):
      guard let provider = providers.withLock({ $0[role] }) else { return .refused(FORSETTI_ERR_UNAVAILABLE) }
      switch provider.target {
      case .local: return .relay
      case .remote(let remote):
        return .channel(role, provider: provider.moduleID, open: { remote.connect(caller.moduleID, $0, $1) })
      }
    }
  }

  /// The module serving the role `number` names, when `caller` may call it.
  func provider(_ number: Int64, for caller: ModuleCaller) -> String? {
    guard case .success(let (role, _)) = callable(number, by: caller) else { return nil }
    return providers.withLock { $0[role]?.moduleID }
  }

  /// `caller` says a call on its channel to the provider of the role `number` names timed out.
  /// Not believed: the host looks at the provider's progress, and kills it only if a handler
  /// is still in one call past that call's deadline and the grace.
  func stalled(_ number: Int64, from caller: ModuleCaller) -> Int32 {
    switch callable(number, by: caller) {
    case .failure(let refusal): return refusal.status
    case .success(let (role, _)):
      providers.withLock { $0[role] }?.suspect("a call from \(caller.moduleID) on its channel timed out")
      return FORSETTI_OK
    }
  }

  /// Withdraws whatever `moduleID`'s `instance` serves, then waits (at most `limit` seconds) for
  /// a call already in its handler, so none runs once the module's stop has begun.
  func withdraw(_ moduleID: String, instance: UInt64, limit: Double = 1) {
    let removed: [Provider] = providers.withLock { p in
      let gone = p.filter { $0.value.moduleID == moduleID && $0.value.instance == instance }
      for role in gone.keys { p[role] = nil }
      return Array(gone.values)
    }
    for provider in removed {
      provider.disconnect()
      // Waits out the calls inside: every slot taken, then given back.
      let until = CallRing.nanoseconds() &+ UInt64(limit * 1e9)
      var held = 0
      for _ in 0..<provider.turn.slots where provider.turn.enter("", until: until) == .entered { held += 1 }
      for _ in 0..<held { provider.turn.leave() }
    }
  }

  /// Who serves each role now: the module, whether in the host's process, and its gate's load
  /// (for an in-process provider its handler's calls; for one in a worker the host's own calls
  /// into its serve ring).
  var serving:
    [(role: DefaultModuleRole, moduleID: String, inProcess: Bool, slots: Int, running: Int, queued: Int)]
  {
    providers.withLock { Array($0) }.sorted { $0.key.rawValue < $1.key.rawValue }.map { role, p in
      let inProcess: Bool
      switch p.target {
      case .local: inProcess = true
      case .remote: inProcess = false
      }
      let load = p.turn.load
      return (role, p.moduleID, inProcess, p.turn.slots, load.running, load.queued)
    }
  }

  private static let instances = Atomic<UInt64>(0)

  /// A number no other module instance has: tells apart two instances of one module.
  static func nextInstance() -> UInt64 { instances.add(1, ordering: .relaxed).newValue }
}
