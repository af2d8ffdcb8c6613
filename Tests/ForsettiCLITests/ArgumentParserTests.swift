import Testing

@testable import ForsettiCLI

@Suite struct ArgumentParserTests {
  let spec = CommandSpec(
    name: "demo", abstract: "A demo verb.",
    options: [
      .value("manifests", "DIR", "Where manifests are."), .flag("json", "JSON output."),
      .value("plugins", "DIR", "Binaries.", repeatable: true),
    ],
    positionals: [PositionalSpec("MODULE_ID", "A module.", optional: true)])

  @Test func bothValueSpellingsAreEqual() throws {
    let a = try ArgumentParser.parse(["--manifests", "m", "--json"], for: spec)
    let b = try ArgumentParser.parse(["--manifests=m", "--json"], for: spec)
    #expect(a == b)
    #expect(a.value("manifests") == "m")
    #expect(a.flag("json"))
  }

  @Test func valueMayContainEqualsAndStartWithDash() throws {
    let p = try ArgumentParser.parse(["--manifests=a=b", "--plugins", "-odd", "--plugins=x"], for: spec)
    #expect(p.value("manifests") == "a=b")
    #expect(p.all("plugins") == ["-odd", "x"])
  }

  @Test func unknownOptionSuggestsTheClosest() {
    #expect(throws: UsageError.unknownOption("--manifest", command: "demo", suggestion: "manifests")) {
      try ArgumentParser.parse(["--manifest", "m"], for: spec)
    }
    #expect(throws: UsageError.unknownOption("--zzzzzz", command: "demo", suggestion: nil)) {
      try ArgumentParser.parse(["--zzzzzz"], for: spec)
    }
  }

  @Test func malformedUsesAreNamed() {
    #expect(throws: UsageError.missingValue(option: "manifests", valueName: "DIR")) {
      try ArgumentParser.parse(["--manifests"], for: spec)
    }
    #expect(throws: UsageError.missingValue(option: "manifests", valueName: "DIR")) {
      try ArgumentParser.parse(["--manifests", "--json"], for: spec)
    }
    #expect(throws: UsageError.unexpectedValue(option: "json")) {
      try ArgumentParser.parse(["--json=yes"], for: spec)
    }
    #expect(throws: UsageError.repeatedOption("manifests")) {
      try ArgumentParser.parse(["--manifests", "a", "--manifests", "b"], for: spec)
    }
    #expect(throws: UsageError.unexpectedArgument("extra")) {
      try ArgumentParser.parse(["one", "extra"], for: spec)
    }
  }

  @Test func doubleDashEndsOptionsAndHelpIsRecognised() throws {
    let p = try ArgumentParser.parse(["--", "--json"], for: spec)
    #expect(p.positionals == ["--json"])
    #expect(!p.flag("json"))
    #expect(try ArgumentParser.parse(["--manifests", "x", "-h"], for: spec).helpRequested)
  }

  @Test func helpIsGeneratedFromTheSameDeclarations() {
    let help = spec.helpText(program: "forsetti-host")
    for o in spec.options { #expect(help.contains("--\(o.name)")) }
    #expect(help.contains("USAGE: forsetti-host demo [MODULE_ID] [options]"))
    #expect(help.contains("(repeatable)"))
  }
}

extension ArgumentParserTests {
  @Test func aFlagTakesTrueOrFalseSoTheCommandLineCanTurnItOff() throws {
    let on = try ArgumentParser.parse(["--json=true"], for: spec)
    #expect(on.flag("json") && on.negatedFlags.isEmpty)
    let off = try ArgumentParser.parse(["--json", "--json=false"], for: spec)
    #expect(!off.flag("json") && off.negatedFlags == ["json"], "the last one given wins")
    #expect(try ArgumentParser.parse(["--json=false", "--json"], for: spec).flag("json"))
  }
}
