/// The steps of the gate stack, in the order that is the contract (DESIGN.md).
public enum GateStep: String, Sendable, Hashable, CaseIterable, Comparable {
  case discover
  case inspectBinary
  case compatibility
  case approval
  case entitlement
  case runtimeRequirements
  case load
  case identityAndUI
  case start

  /// The step's place in the contract order.
  var position: Int {
    switch self {
    case .discover: 0
    case .inspectBinary: 1
    case .compatibility: 2
    case .approval: 3
    case .entitlement: 4
    case .runtimeRequirements: 5
    case .load: 6
    case .identityAndUI: 7
    case .start: 8
    }
  }

  public static func < (a: GateStep, b: GateStep) -> Bool { a.position < b.position }
}

/// What one step decided.
public enum GateVerdict: String, Sendable, Hashable {
  case pass
  case fail
  /// Not evaluated: an earlier step failed, or this run does not cover the step.
  case skipped
}

/// One line of a `GateTrace`.
public struct GateEntry: Sendable, Hashable {
  public var step: GateStep
  public var verdict: GateVerdict
  /// The reason code when the step failed; nil otherwise.
  public var reason: ReasonCode?
  /// What was checked and, on failure, what was wrong and what to do.
  public var detail: String {
    get { note.text }
    set { note = GateNote(newValue) }
  }
  var note: GateNote

  public init(step: GateStep, verdict: GateVerdict, reason: ReasonCode? = nil, detail: String) {
    self.init(step: step, verdict: verdict, reason: reason, note: GateNote(detail))
  }

  init(step: GateStep, verdict: GateVerdict, reason: ReasonCode? = nil, note: GateNote) {
    self.step = step
    self.verdict = verdict
    self.reason = reason
    self.note = note
  }
}

/// The text of a trace line, given or rendered when first read.
///
/// Gating builds a trace for every module, and most traces are never printed: building each
/// pass line eagerly (versions, paths, lists) cost more than the rules themselves. A deferred
/// note renders from immutable values, so reading it twice gives the same text.
public struct GateNote: Sendable, Hashable {
  private enum Storage: Sendable {
    case text(String)
    case deferred(Renderer)
    case step(any GateNoteSource, GateStep)
  }

  /// Holds only an immutable, `@Sendable` closure: safe to share between threads.
  private final class Renderer: Sendable {
    let render: @Sendable () -> String
    init(_ render: @escaping @Sendable () -> String) { self.render = render }
  }

  private let storage: Storage

  public init(_ text: String) { storage = .text(text) }

  /// A note rendered by `render` whenever its text is read.
  public static func deferred(_ render: @escaping @Sendable () -> String) -> GateNote {
    GateNote(storage: .deferred(Renderer(render)))
  }

  /// The line `source` renders for `step` when read: one shared source can serve every pass
  /// line of a module, where a closure per line would box its own copy of what it renders from.
  public static func rendered(by source: any GateNoteSource, for step: GateStep) -> GateNote {
    GateNote(storage: .step(source, step))
  }

  private init(storage: Storage) { self.storage = storage }

  public var text: String {
    switch storage {
    case .text(let t): t
    case .deferred(let r): r.render()
    case .step(let source, let step): source.note(for: step)
    }
  }

  /// Notes are equal when their texts are.
  public static func == (a: GateNote, b: GateNote) -> Bool { a.text == b.text }
  public func hash(into h: inout Hasher) { h.combine(text) }
}

/// Renders pass lines from immutable values it holds (a module's manifest and the context it
/// was judged in), for the steps it knows. A class: a note then holds one reference, which
/// copying and destroying a trace's entries only count, where any value would be boxed.
public protocol GateNoteSource: AnyObject, Sendable {
  func note(for step: GateStep) -> String
}

/// Everything the gate stack decided about one module, step by step.
public struct GateTrace: Sendable, Hashable {
  public private(set) var entries: [GateEntry] = []

  public init(entries: [GateEntry] = []) { self.entries = entries }

  /// An empty trace with room for every step, so recording a module's steps allocates once.
  static func forAllSteps() -> GateTrace {
    var trace = GateTrace()
    trace.entries.reserveCapacity(stepCount)
    return trace
  }

  /// Made once: `allCases` builds a new array on each use.
  private static let stepCount = GateStep.allCases.count

  /// The first failing entry: the one that blocks activation.
  public var firstFailure: GateEntry? { entries.first { $0.verdict == .fail } }

  /// Whether no step failed.
  public var passed: Bool { firstFailure == nil }

  public mutating func pass(_ step: GateStep, _ detail: String) {
    entries.append(.init(step: step, verdict: .pass, detail: detail))
  }

  /// A pass whose line is rendered only if someone reads it.
  public mutating func pass(_ step: GateStep, _ note: GateNote) {
    entries.append(.init(step: step, verdict: .pass, note: note))
  }

  public mutating func fail(_ step: GateStep, _ reason: ReasonCode, _ detail: String) {
    entries.append(.init(step: step, verdict: .fail, reason: reason, detail: detail))
  }

  public mutating func skip(_ step: GateStep, _ detail: String) {
    entries.append(.init(step: step, verdict: .skipped, detail: detail))
  }

  /// Records the outcome of a rule: pass with `passDetail`, or fail with the rule's violation.
  public mutating func record(_ step: GateStep, _ outcome: GateOutcome, passDetail: String) {
    record(step, outcome, passNote: GateNote(passDetail))
  }

  /// Records the outcome of a rule: pass with `passNote`, or fail with the rule's violation.
  public mutating func record(_ step: GateStep, _ outcome: GateOutcome, passNote: GateNote) {
    switch outcome {
    case .pass: pass(step, passNote)
    case .fail(let v): fail(step, v.reason, v.detail)
    }
  }

  /// Marks every step after the last recorded one as skipped, saying why.
  public mutating func skipRemaining(through last: GateStep = .start, because why: String) {
    let after = entries.lazy.map(\.step).max()
    for step in GateStep.allCases where step <= last && after.map({ step > $0 }) ?? true {
      skip(step, why)
    }
  }
}

/// A rule's violation: a reason code and the human detail naming field, expected and actual.
public struct GateViolation: Error, Sendable, Hashable, CustomStringConvertible {
  public var reason: ReasonCode
  public var detail: String

  public init(_ reason: ReasonCode, _ detail: String) {
    self.reason = reason
    self.detail = detail
  }

  public var description: String { "\(reason.rawValue): \(detail)" }
}

/// What a pure gate rule returns.
public enum GateOutcome: Sendable, Hashable {
  case pass
  case fail(GateViolation)

  public var violation: GateViolation? {
    if case .fail(let v) = self { return v }
    return nil
  }
}
