import CForsetti
import Dispatch
import ForsettiBridge
import ForsettiCore
import Synchronization

/// The host's view of modules serving modules between workers: every role channel (a
/// consumer's lanes to a provider's worker, `ChannelRing`) and every provider's serve ring, kept
/// mapped so the host sees each call in flight, and each worker's own progress page
/// (`WorkerProgress`: which roles its threads wait on, which calls its handlers are in and
/// since when), which no other worker can write. From these it judges the two things no queued
/// call may delay:
///
/// - **Cycles** (`judgeQueued`): a call left queued at a provider with no free handler that
///   waits, through providers with none free either, on the calling module itself would wait
///   for ever (until deadlines); the host withdraws it and the caller gets
///   FORSETTI_ERR_CALL_CYCLE. Judged under one lock, a withdrawal seen by the next judgement,
///   so of two calls closing the same cycle at once one is refused, not both.
/// - **Hung** (`suspect`): a provider is hung only when a handler has stayed in one call past
///   that call's deadline — never less than FORSETTI_ROLE_CALL_TIMEOUT_MS, whatever deadline a
///   caller chose — plus FORSETTI_ROLE_HUNG_GRACE_MS. A provider that answers, however slowly,
///   is never killed: its callers get BUSY or TIMEOUT.
///
/// Both verdicts read only what a module says about itself on its own page: whether it is full
/// and since when (the provider), which roles it waits on (each module on a cycle). A consumer
/// scribbling on a channel it shares can withdraw or misreport only its own calls; a provider
/// lying about its progress escapes the hung verdict, but its consumers' calls still end at
/// their deadlines.
final class RoleChannels: Sendable {
  /// A provider in a worker, entered when it serves.
  struct Provider: Sendable {
    let moduleID: String
    /// The worker (its `WorkerProcess`): a restarted provider is another.
    let owner: ObjectIdentifier
    let concurrency: Int
    /// The index of the role it serves (`DefaultModuleRole.allCases`).
    let role: Int
    /// The host's own calls of it (from modules in the host's process, the application).
    let serveRing: CallRing
    /// Its worker's own page: the calls its handlers are in.
    let progress: WorkerProgress
    /// Kills its worker as hung, with the verdict.
    let kill: @Sendable (String) -> Void
  }

  /// One consumer's channel to one provider.
  struct Channel: Sendable {
    let consumer: String
    let consumerOwner: ObjectIdentifier
    let provider: String
    let providerOwner: ObjectIdentifier
    let ring: ChannelRing
  }

  private struct State {
    var providers: [String: Provider] = [:]
    var channels: [Channel] = []
    /// Each consumer's worker's own page (which roles its threads wait on), by module.
    var consumers: [String: (owner: ObjectIdentifier, progress: WorkerProgress)] = [:]
    /// When the next look at a provider's progress is due (CLOCK_MONOTONIC nanoseconds).
    var watches: [String: UInt64] = [:]
  }

  /// Everything, judgements of queued calls included: one at a time, so a withdrawal is seen
  /// by the next judgement.
  private let state = Mutex(State())
  private let watcher = DispatchQueue(label: "forsetti.roles.progress")
  /// FORSETTI_ROLE_HUNG_GRACE_MS in nanoseconds.
  static let grace = UInt64(FORSETTI_ROLE_HUNG_GRACE_MS) * 1_000_000

  /// `moduleID` serves its role from the worker `owner` now, `concurrency` calls at once.
  func serving(_ provider: Provider) {
    state.withLock { $0.providers[provider.moduleID] = provider }
  }

  /// The provider's concurrency, if it serves from a worker.
  func concurrency(of moduleID: String) -> Int? { state.withLock { $0.providers[moduleID]?.concurrency } }

  /// A new channel from `consumer` (in the worker `consumerOwner`) to `provider`: as many lanes
  /// as the provider's concurrency plus the queue. nil when the provider does not serve from a
  /// worker now, or the channel cannot be made.
  func open(
    consumer: String, consumerOwner: ObjectIdentifier, consumerProgress: WorkerProgress?, provider: String
  ) -> (ChannelRing, Int32)? {
    guard let p = state.withLock({ $0.providers[provider] }),
      let (ring, fd) = ChannelRing.create(lanes: p.concurrency + Int(FORSETTI_ROLE_QUEUE_DEPTH))
    else { return nil }
    state.withLock { s in
      s.channels.removeAll { $0.ring.isClosed }
      if let consumerProgress { s.consumers[consumer] = (consumerOwner, consumerProgress) }
      s.channels.append(
        Channel(
          consumer: consumer, consumerOwner: consumerOwner, provider: provider, providerOwner: p.owner,
          ring: ring))
    }
    return (ring, fd)
  }

  /// The open channels, for a handover to a new image of the host.
  func handover() -> [Channel] { state.withLock { $0.channels.filter { !$0.ring.isClosed } } }

  /// Enters a channel an image of the host before this one opened, between workers this image
  /// now serves (the consumer's page is entered with it).
  func adopt(_ channel: Channel, consumerProgress: WorkerProgress?) {
    state.withLock { s in
      if let consumerProgress { s.consumers[channel.consumer] = (channel.consumerOwner, consumerProgress) }
      s.channels.append(channel)
    }
  }

  /// Whether the worker `consumerOwner` has an open channel to `provider`'s worker now.
  func hasChannel(consumerOwner: ObjectIdentifier, provider: String) -> Bool {
    state.withLock { s in
      guard let p = s.providers[provider] else { return false }
      return s.channels.contains {
        $0.consumerOwner == consumerOwner && $0.providerOwner == p.owner && !$0.ring.isClosed
      }
    }
  }

  /// Closes the channels the worker `owner` is the provider's end of (it serves no more), or
  /// with `asConsumer` every channel it is either end of (it stops or went).
  func close(owner: ObjectIdentifier, asConsumer: Bool) {
    let gone = state.withLock { s -> [Channel] in
      let gone = s.channels.filter { $0.providerOwner == owner || (asConsumer && $0.consumerOwner == owner) }
      s.channels.removeAll { $0.providerOwner == owner || (asConsumer && $0.consumerOwner == owner) }
      for (id, p) in s.providers where p.owner == owner {
        s.providers[id] = nil
        s.watches[id] = nil
      }
      if asConsumer { s.consumers = s.consumers.filter { $0.value.owner != owner } }
      return gone
    }
    for c in gone { c.ring.close() }
  }

  // MARK: cycles

  /// Whether `moduleID` has no free handler, by its own page: as many calls begun and
  /// unanswered as it runs at once. A module that serves no role from a worker is never full.
  private static func full(_ moduleID: String, _ s: State) -> Bool {
    guard let p = s.providers[moduleID] else { return false }
    return p.progress.busy.count >= p.concurrency
  }

  /// The providers `moduleID` waits on, by its own page: the role's provider, for each role one
  /// of its threads waits on and it has a channel to.
  private static func waitsOn(_ moduleID: String, _ s: State) -> Set<String> {
    guard let mine = s.consumers[moduleID]?.progress else { return [] }
    var out: Set<String> = []
    for c in s.channels where c.consumer == moduleID && !c.ring.isClosed {
      if let p = s.providers[c.provider], p.owner == c.providerOwner, mine.waits(on: p.role) > 0 {
        out.insert(c.provider)
      }
    }
    return out
  }

  /// `consumer` (in the worker `owner`) says its call on lane `lane` of its channel to
  /// `provider` waits for a handler. When the provider is full and waits, through full
  /// providers only, on the consumer, itself full, the call would close a cycle: withdrawn if
  /// no handler began it meanwhile, and FORSETTI_ERR_CALL_CYCLE is the answer.
  func judgeQueued(consumer: String, owner: ObjectIdentifier, provider: String, lane: Int) -> Int32 {
    state.withLock { s -> Int32 in
      guard
        let channel = s.channels.last(where: {
          $0.consumer == consumer && $0.consumerOwner == owner && $0.provider == provider
            && !$0.ring.isClosed
        }), channel.ring.lanes.indices.contains(lane)
      else { return FORSETTI_OK }
      let call = channel.ring.lanes[lane]
      let view = call.view
      guard view.isQueued, Self.full(provider, s), Self.full(consumer, s) else { return FORSETTI_OK }
      // Does the provider wait, through full modules only, on the consumer?
      var seen: Set<String> = [provider]
      var frontier = [provider]
      var closes = false
      while let next = frontier.popLast(), !closes {
        for waited in Self.waitsOn(next, s) {
          if waited == consumer {
            closes = true
            break
          }
          if !seen.contains(waited), Self.full(waited, s) {
            seen.insert(waited)
            frontier.append(waited)
          }
        }
      }
      guard closes, call.withdraw(view.seq) else { return FORSETTI_OK }
      return FORSETTI_ERR_CALL_CYCLE
    }
  }

  // MARK: progress

  /// A call of `moduleID` timed out (`why`: whose, perhaps only a consumer's claim): the host
  /// looks at its handlers' calls, on its own page, when the first of them is due, and kills
  /// the worker only if a handler is still in that same call then.
  func suspect(_ moduleID: String, _ why: String) {
    let due: UInt64? = state.withLock { s in
      guard let p = s.providers[moduleID] else { return nil }
      let first = p.progress.busy.map { Self.due($0.started, $0.deadline) }.min()
      guard let first, first < s.watches[moduleID] ?? .max else { return nil }
      s.watches[moduleID] = first
      return first
    }
    guard let due else { return }
    let now = CallRing.nanoseconds()
    watcher.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: due > now ? due - now : 0))) { [self] in
      look(at: moduleID, why)
    }
  }

  /// When a handler in a call begun at `started` makes its provider hung: the call's deadline,
  /// never less than the longest a call may have (a caller's short deadline does not shorten
  /// its provider's life), plus the grace.
  private static func due(_ started: UInt64, _ deadline: UInt64) -> UInt64 {
    max(deadline, started &+ RoleCall.timeoutNanoseconds) &+ grace
  }

  private func look(at moduleID: String, _ why: String) {
    let now = CallRing.nanoseconds()
    let found = state.withLock { s -> (Provider, UInt64, UInt64, String, String)? in
      s.watches[moduleID] = nil
      guard let p = s.providers[moduleID],
        let stuck = p.progress.busy.filter({ Self.due($0.started, $0.deadline) <= now }).min(by: {
          $0.started < $1.started
        })
      else { return nil }
      // Which call it is, for the log only: the running lane begun closest to that instant
      // (the lanes are the consumers' to write too).
      var best: (gap: UInt64, consumer: String, lane: CallRing)?
      let serve = p.serveRing.view
      if serve.isRunning { best = (Self.gap(serve.started, stuck.started), "the host", p.serveRing) }
      for c in s.channels where c.provider == moduleID && c.providerOwner == p.owner {
        for lane in c.ring.lanes {
          let v = lane.view
          guard v.isRunning else { continue }
          let g = Self.gap(v.started, stuck.started)
          if best == nil || g < best?.gap ?? .max { best = (g, c.consumer, lane) }
        }
      }
      let method = best?.lane.requestMethod.map { "\"\(ModuleText.visible($0))\"" } ?? "(unknown)"
      return (p, stuck.started, stuck.deadline, best?.consumer ?? "a consumer", method)
    }
    guard let (p, started, deadline, consumer, method) = found else {
      // Nothing stuck: calls still running may come due later.
      suspect(moduleID, why)
      return
    }
    let inCall = (now &- started) / 1_000_000
    let past = (now &- (Self.due(started, deadline) &- Self.grace)) / 1_000_000
    p.kill(
      "hung: its handler has been in \(consumer)'s call \(method) for \(inCall) ms, \(past) ms past that call's deadline (\(why))"
    )
  }

  private static func gap(_ a: UInt64, _ b: UInt64) -> UInt64 { a > b ? a - b : b - a }
}
