/// How the CPU is shared between modules (`--cpu-weight`, `--cpu-max`): each worker's cgroup
/// gets a weight, so that under contention a module's threads compete as one, and optionally a
/// hard ceiling. Weights are in cgroup v2 terms (1–10000, 100 by default: every module equal);
/// v1 gets the shares systemd would give the same weight.
public struct CPUShares: Sendable, Equatable {
  /// The weight of a module named nowhere else.
  public var defaultWeight = CPUShares.standardWeight
  /// Weights by module ID.
  public var weights: [String: Int] = [:]
  /// The ceiling of a module named nowhere else, in percent of one CPU; nil: none.
  public var defaultMaxPercent: Int?
  /// Ceilings by module ID, in percent of one CPU.
  public var maxPercents: [String: Int] = [:]

  /// The kernel's own default weight (v2 `cpu.weight` 100, v1 `cpu.shares` 1024).
  public static let standardWeight = 100
  /// `cpu.weight` accepts 1–10000.
  public static let weightRange = 1...10_000
  /// 1 % of one CPU is the kernel's smallest quota (1 ms in a 100 ms period); 100000 % is a
  /// thousand CPUs, past which a ceiling means nothing.
  public static let maxPercentRange = 1...100_000
  /// The CFS bandwidth period the ceiling is a quota of, in microseconds (the kernel's default).
  package static let periodMicroseconds = 100_000

  /// Every module at the standard weight, without a ceiling.
  public init() {}

  /// The weight of `moduleID`.
  public func weight(for moduleID: String) -> Int { weights[moduleID] ?? defaultWeight }

  /// The ceiling of `moduleID` in percent of one CPU; nil: none.
  public func maxPercent(for moduleID: String) -> Int? { maxPercents[moduleID] ?? defaultMaxPercent }

  /// The module IDs named in a weight or a ceiling of their own.
  public var namedModules: Set<String> { Set(weights.keys).union(maxPercents.keys) }

  /// v1 `cpu.shares` for a v2 weight, as systemd maps `CPUWeight=`: 100 is 1024.
  package static func v1Shares(weight: Int) -> Int { weight * 1024 / 100 }

  /// The quota in microseconds per `periodMicroseconds` for a ceiling in percent of one CPU.
  package static func quotaMicroseconds(percent: Int) -> Int { percent * periodMicroseconds / 100 }

  /// Sets one `--cpu-weight` value: `N` (every module) or `MODULE_ID=N`.
  public mutating func setWeight(_ text: String) throws(CPUSharesError) {
    let (moduleID, value) = try Self.parse(text, option: .weight, range: Self.weightRange)
    if let moduleID { weights[moduleID] = value } else { defaultWeight = value }
  }

  /// Sets one `--cpu-max` value: `PERCENT` (every module) or `MODULE_ID=PERCENT`.
  public mutating func setMaxPercent(_ text: String) throws(CPUSharesError) {
    let (moduleID, value) = try Self.parse(text, option: .max, range: Self.maxPercentRange)
    if let moduleID { maxPercents[moduleID] = value } else { defaultMaxPercent = value }
  }

  /// One line for the start report: "cpu weight 100 each (com.a 300), ceiling 50% of a CPU
  /// each (com.b 150%)", or, with no default ceiling, "…, no ceiling but com.b's 50% of a CPU"
  /// (a module's own ceiling never reads as "no ceiling").
  public var summary: String {
    func named(_ values: [String: Int], _ unit: String) -> [String] {
      values.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)\(unit)" }
    }
    let weight = weights.isEmpty ? "" : " (" + named(weights, "").joined(separator: ", ") + ")"
    let ceiling: String
    if let all = defaultMaxPercent {
      ceiling =
        "ceiling \(all)% of a CPU each"
        + (maxPercents.isEmpty ? "" : " (" + named(maxPercents, "%").joined(separator: ", ") + ")")
    } else if maxPercents.isEmpty {
      ceiling = "no ceiling"
    } else {
      ceiling =
        "no ceiling but "
        + maxPercents.sorted { $0.key < $1.key }.map { "\($0.key)'s \($0.value)% of a CPU" }.joined(
          separator: ", ")
    }
    return "cpu weight \(defaultWeight) each" + weight + ", " + ceiling
  }

  /// `[MODULE_ID=]N` with N a whole number in `range`.
  private static func parse(_ text: String, option: CPUSharesError.Option, range: ClosedRange<Int>)
    throws(CPUSharesError) -> (String?, Int)
  {
    var moduleID: String?
    var number = Substring(text)
    if let equals = text.lastIndex(of: "=") {
      moduleID = String(text[..<equals])
      number = text[text.index(after: equals)...]
      guard moduleID?.isEmpty == false else { throw .noModuleID(option, value: text) }
    }
    // Digits only: Int("+5") and Int("0x10") are not what an operator means by a number here.
    guard !number.isEmpty, number.count <= 9, number.allSatisfy({ ("0"..."9").contains($0) }),
      let value = Int(number)
    else {
      throw .notANumber(option, value: text, range: range)
    }
    guard range.contains(value) else { throw .outOfRange(option, value: text, range: range) }
    return (moduleID, value)
  }
}

/// A `--cpu-weight` or `--cpu-max` value that cannot be used, with the value and the range.
public enum CPUSharesError: Error, Sendable, Equatable, CustomStringConvertible {
  /// Which option the value was given to.
  public enum Option: String, Sendable, Equatable {
    case weight = "cpu-weight"
    case max = "cpu-max"

    var unit: String { self == .weight ? "a weight" : "a percentage of one CPU" }
  }

  case notANumber(Option, value: String, range: ClosedRange<Int>)
  case outOfRange(Option, value: String, range: ClosedRange<Int>)
  case noModuleID(Option, value: String)

  /// The option, without its dashes.
  public var option: String {
    switch self {
    case .notANumber(let o, _, _), .outOfRange(let o, _, _), .noModuleID(let o, _): o.rawValue
    }
  }

  /// The value as given.
  public var value: String {
    switch self {
    case .notANumber(_, let v, _), .outOfRange(_, let v, _), .noModuleID(_, let v): v
    }
  }

  public var description: String {
    switch self {
    case .notANumber(let o, _, let r):
      "expected [MODULE_ID=]N, N a whole number from \(r.lowerBound) to \(r.upperBound) (\(o.unit))"
    case .outOfRange(let o, _, let r):
      "\(o.unit) must be from \(r.lowerBound) to \(r.upperBound)"
    case .noModuleID:
      "a module ID is missing before '='; expected [MODULE_ID=]N"
    }
  }
}
