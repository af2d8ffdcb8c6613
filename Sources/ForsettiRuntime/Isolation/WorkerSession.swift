import CForsetti
import ForsettiBridge
import ForsettiCore
import Glibc
import Synchronization

/// Where one worker is in the protocol, and the one place that decides whether a frame from it
/// may come now. Shared by the reader thread (frames in) and the host's main thread (requests
/// out): each request moves the phase before its frame is sent, so the answer always finds it.
final class WorkerSession: Sendable {
  /// The phase of the protocol, named after what the host waits for.
  enum Phase: Sendable, Equatable, CustomStringConvertible {
    /// Started; the host has not said which module it is for.
    case spawned
    /// `configure` sent: waiting for `confined`.
    case configuring
    /// Confined: waiting for `loaded` (the module's constructors run now).
    case loading
    /// Loaded: the host has not sent `start` yet.
    case loaded
    /// `start` sent: waiting for `startResult`.
    case starting
    /// `startResult(FORSETTI_OK)` came: the host has not sent `confirmStart` yet.
    case returned
    /// `confirmStart` with this nonce sent: waiting for `startConfirmed`.
    case confirming(UInt64)
    case started
    /// `saveState` with this request ID sent: waiting for `stateSaved`.
    case saving(UInt64)
    /// `stop` sent: waiting for `stopped`.
    case stopping
    /// The worker said its last word (`loadFailed`, a failed `startResult`, `stopped`).
    case finished
    case violated

    var description: String {
      switch self {
      case .spawned: "spawned (before configure)"
      case .configuring: "configuring (waiting for confined)"
      case .loading: "loading (waiting for loaded)"
      case .loaded: "loaded (before start)"
      case .starting: "starting (waiting for startResult)"
      case .returned: "start returned (before confirmStart)"
      case .confirming: "confirming start (waiting for startConfirmed)"
      case .started: "started"
      case .saving(let id): "saving state (waiting for stateSaved \(id))"
      case .stopping: "stopping (waiting for stopped)"
      case .finished: "finished"
      case .violated: "violated"
      }
    }
  }

  /// What the reader does with a frame from the worker.
  enum Verdict: Sendable, Equatable {
    /// A lifecycle frame valid now: for whoever waits on the worker.
    case lifecycle
    /// A log or telemetry frame: served.
    case service
    /// A late `stateSaved` for a request the host gave up on: dropped.
    case stale
    /// Not valid now: the worker is to be killed.
    case violation(ProtocolViolation)
  }

  private struct Inner {
    var phase = Phase.spawned
    var nextSaveID: UInt64 = 1
    /// A `saveState` the host stopped waiting for: its late answer is dropped, once.
    var abandonedSave: UInt64?
    var violation: ProtocolViolation?
  }

  private let inner = Mutex(Inner())

  var phase: Phase { inner.withLock { $0.phase } }

  /// The violation that ended the worker, if one did.
  var violation: ProtocolViolation? { inner.withLock { $0.violation } }

  /// Judges one frame from the worker and moves the phase.
  func receive(_ f: WireFrame) -> Verdict {
    inner.withLock { s in
      if s.phase == .violated, let v = s.violation { return .violation(v) }
      let verdict = Self.judge(f, &s)
      if case .violation(let v) = verdict {
        s.phase = .violated
        s.violation = v
      }
      return verdict
    }
  }

  /// Records bytes that are not a frame; `kind` is their first four bytes, if there were four.
  func malformed(kind: UInt32?, _ why: String) -> ProtocolViolation {
    inner.withLock { s in
      if let v = s.violation { return v }
      let v = ProtocolViolation(kind: kind, phase: s.phase, malformed: why)
      s.phase = .violated
      s.violation = v
      return v
    }
  }

  private static func judge(_ f: WireFrame, _ s: inout Inner) -> Verdict {
    func violation(_ why: String? = nil) -> Verdict {
      .violation(ProtocolViolation(kind: f.kind.rawValue, phase: s.phase, detail: why))
    }
    switch (f.kind, s.phase) {
    case (.log, _), (.telemetry, _):
      // Modules may log from their constructors (at load) until the process ends.
      return [.spawned, .configuring].contains(s.phase) ? violation() : .service
    case (.confined, .configuring):
      s.phase = .loading
      return .lifecycle
    case (.loadFailed, .configuring), (.loadFailed, .loading), (.loadFailed, .loaded):
      s.phase = .finished
      return .lifecycle
    case (.loaded, .loading):
      guard f.string(0) != nil else { return violation("without its description") }
      s.phase = .loaded
      return .lifecycle
    case (.startResult, .starting):
      guard let status = f.int(0) else { return violation("without a status") }
      s.phase = status == Int64(FORSETTI_OK) ? .returned : .finished
      return .lifecycle
    case (.startConfirmed, .confirming(let nonce)) where f.id == nonce:
      s.phase = .started
      return .lifecycle
    case (.stateSaved, .saving(let id)) where f.id == id:
      guard f.bytes(0) != nil else { return violation("without state bytes") }
      s.phase = .started
      return .lifecycle
    case (.stateSaved, .started), (.stateSaved, .stopping):
      guard let late = s.abandonedSave, late == f.id else { return violation("(id \(f.id), not asked for)") }
      s.abandonedSave = nil
      return .stale
    case (.stateSaved, _):
      return violation("(id \(f.id))")
    case (.stopped, .stopping):
      s.phase = .finished
      return .lifecycle
    default:
      return violation()
    }
  }

  // MARK: Requests from the host (main thread)

  /// Before sending `configure`; false if the worker is past that.
  func configure() -> Bool { move(from: [.spawned], to: .configuring) }

  /// A worker handed over by the image before this one, its module running (`WorkerHandover`).
  func adopt() { _ = move(from: [.spawned], to: .started) }

  /// Before sending `start`; false unless the worker is loaded.
  func start() -> Bool { move(from: [.loaded], to: .starting) }

  /// Before sending `confirmStart`: its nonce (never 0, never guessable), or nil unless
  /// `startResult(FORSETTI_OK)` just came.
  func confirmStart() -> UInt64? {
    inner.withLock { s in
      guard s.phase == .returned else { return nil }
      let nonce = UInt64.random(in: 1...UInt64.max)
      s.phase = .confirming(nonce)
      return nonce
    }
  }

  /// Before sending `saveState`: the request's ID, or nil unless the module runs.
  func saveState() -> UInt64? {
    inner.withLock { s in
      guard s.phase == .started else { return nil }
      let id = s.nextSaveID
      s.nextSaveID &+= 1
      s.phase = .saving(id)
      return id
    }
  }

  /// The host stopped waiting for `stateSaved` `id`: the module runs on, and a late answer is
  /// dropped rather than taken for an unsolicited one.
  func abandonSave(_ id: UInt64) {
    inner.withLock { s in
      guard s.phase == .saving(id) else { return }
      s.phase = .started
      s.abandonedSave = id
    }
  }

  /// Before sending `stop`; false unless the module runs (or is saving its state).
  func stop() -> Bool {
    inner.withLock { s in
      switch s.phase {
      case .started: break
      case .saving(let id): s.abandonedSave = id
      default: return false
      }
      s.phase = .stopping
      return true
    }
  }

  private func move(from: [Phase], to: Phase) -> Bool {
    inner.withLock { s in
      guard from.contains(s.phase) else { return false }
      s.phase = to
      return true
    }
  }
}

/// A frame the worker had no right to send now (or bytes that are not a frame), and the phase
/// it came in: the detail of `protocolViolation`.
struct ProtocolViolation: Error, Sendable, Equatable, CustomStringConvertible {
  /// The raw kind of the offending frame (its first four bytes); nil for fewer bytes.
  var kind: UInt32?
  var phase: WorkerSession.Phase
  /// What else was wrong with the frame, if anything.
  var detail: String?
  /// Why the bytes are not a frame; nil for a well-formed frame sent out of turn.
  var malformed: String?

  init(kind: UInt32?, phase: WorkerSession.Phase, detail: String? = nil, malformed: String? = nil) {
    self.kind = kind
    self.phase = phase
    self.detail = detail
    self.malformed = malformed
  }

  /// "stopped (104)", "kind 4242 (unknown)".
  var kindName: String {
    guard let kind else { return "no kind" }
    return WireKind(rawValue: kind).map { "\($0) (\(kind))" } ?? "kind \(kind) (unknown)"
  }

  var description: String {
    let what =
      if let malformed {
        "a malformed frame (\(malformed); \(kindName))"
      } else {
        kindName + (detail.map { " \($0)" } ?? "")
      }
    return "the worker sent \(what) while \(phase); it was killed"
  }
}
