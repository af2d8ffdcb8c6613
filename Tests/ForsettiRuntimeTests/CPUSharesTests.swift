import ForsettiRuntime
import Testing

/// `--cpu-weight` and `--cpu-max` values: `[MODULE_ID=]N`, in range, per module or for all;
/// a bad one is refused with the option, the value and the range.
@Suite struct CPUSharesTests {
  @Test func perModuleValuesOverrideTheDefault() throws {
    var shares = CPUShares()
    #expect(shares.weight(for: "com.a") == 100 && shares.maxPercent(for: "com.a") == nil)
    try shares.setWeight("200")
    try shares.setWeight("com.a=1")
    try shares.setWeight("com.b=10000")
    try shares.setMaxPercent("com.a=150")
    #expect(shares.weight(for: "com.a") == 1 && shares.weight(for: "com.b") == 10_000)
    #expect(shares.weight(for: "com.c") == 200)
    #expect(shares.maxPercent(for: "com.a") == 150 && shares.maxPercent(for: "com.c") == nil)
    try shares.setMaxPercent("50")
    #expect(shares.maxPercent(for: "com.c") == 50)
    #expect(
      shares.summary == "cpu weight 200 each (com.a 1, com.b 10000), ceiling 50% of a CPU each (com.a 150%)")
    #expect(CPUShares().summary == "cpu weight 100 each, no ceiling")
    // Issue 40: a module's own ceiling with no default read "no ceiling (com.t.spinc 20%)".
    var one = CPUShares()
    try one.setMaxPercent("com.t.spinc=20")
    #expect(one.summary == "cpu weight 100 each, no ceiling but com.t.spinc's 20% of a CPU")
    #expect(CPUShares.quotaMicroseconds(percent: 150) == 150_000)
  }

  @Test(arguments: [
    ("0", "a weight must be from 1 to 10000"), ("10001", "a weight must be from 1 to 10000"),
    ("com.a=0", "a weight must be from 1 to 10000"), ("lots", "expected [MODULE_ID=]N"),
    ("+5", "expected [MODULE_ID=]N"), ("1.5", "expected [MODULE_ID=]N"), ("com.a=", "expected [MODULE_ID=]N"),
    ("=5", "a module ID is missing"), ("99999999999999999999", "expected [MODULE_ID=]N"),
  ])
  func badWeightsNameTheRange(value: String, why: String) {
    var shares = CPUShares()
    do {
      try shares.setWeight(value)
      Issue.record("\(value) accepted")
    } catch {
      #expect(error.option == "cpu-weight" && error.value == value)
      #expect(error.description.contains(why), "\(error)")
    }
    #expect(shares == CPUShares())
  }

  @Test func badCeilingsNameTheRange() {
    var shares = CPUShares()
    #expect(throws: CPUSharesError.outOfRange(.max, value: "0", range: 1...100_000)) {
      try shares.setMaxPercent("0")
    }
    #expect(throws: CPUSharesError.notANumber(.max, value: "50%", range: 1...100_000)) {
      try shares.setMaxPercent("50%")
    }
    #expect(
      CPUSharesError.outOfRange(.max, value: "0", range: 1...100_000).description.contains(
        "percentage of one CPU"))
  }
}
