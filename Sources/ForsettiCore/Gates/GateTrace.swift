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

  public static func < (a: GateStep, b: GateStep) -> Bool {
    let order = GateStep.allCases
    return (order.firstIndex(of: a) ?? 0) < (order.firstIndex(of: b) ?? 0)
  }
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
  public var detail: String

  public init(step: GateStep, verdict: GateVerdict, reason: ReasonCode? = nil, detail: String) {
    self.step = step
    self.verdict = verdict
    self.reason = reason
    self.detail = detail
  }
}

/// Everything the gate stack decided about one module, step by step.
public struct GateTrace: Sendable, Hashable {
  public private(set) var entries: [GateEntry] = []

  public init(entries: [GateEntry] = []) { self.entries = entries }

  /// The first failing entry: the one that blocks activation.
  public var firstFailure: GateEntry? { entries.first { $0.verdict == .fail } }

  /// Whether no step failed.
  public var passed: Bool { firstFailure == nil }

  public mutating func pass(_ step: GateStep, _ detail: String) {
    entries.append(.init(step: step, verdict: .pass, detail: detail))
  }

  public mutating func fail(_ step: GateStep, _ reason: ReasonCode, _ detail: String) {
    entries.append(.init(step: step, verdict: .fail, reason: reason, detail: detail))
  }

  public mutating func skip(_ step: GateStep, _ detail: String) {
    entries.append(.init(step: step, verdict: .skipped, detail: detail))
  }

  /// Records the outcome of a rule: pass with `passDetail`, or fail with the rule's violation.
  public mutating func record(_ step: GateStep, _ outcome: GateOutcome, passDetail: String) {
    switch outcome {
    case .pass: pass(step, passDetail)
    case .fail(let v): fail(step, v.reason, v.detail)
    }
  }

  /// Marks every step after the last recorded one as skipped, saying why.
  public mutating func skipRemaining(through last: GateStep = .start, because why: String) {
    let after = entries.map(\.step).max()
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
