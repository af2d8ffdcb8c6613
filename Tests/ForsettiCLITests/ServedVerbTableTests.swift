import ForsettiCore
import Testing

@testable import ForsettiCLI

/// The command line serves every verb of the protocol's table, and only those, through the one
/// handler each has (`ServedVerb.named`), as a verb of its own command list.
@Suite struct ServedVerbTableTests {
  @Test func everyServedVerbHasItsHandlerAndItsCommand() {
    let commands = Set(ForsettiHostCLI.verbs.map(\.spec.name))
    for verb in ControlVerb.all {
      // A verb only a host answers asks it itself, and has no handler on the files.
      #expect((ServedVerb.named(verb.name) != nil) != verb.onlyAHost, "\(verb.name) has no handler")
      #expect(commands.contains(verb.name), "\(verb.name) is no command")
      #expect(RemoteVerbs.writing.contains(verb.name) == verb.writes)
    }
    // Only those: no command outside the table is served.
    let served = Set(ControlVerb.all.map(\.name))
    let others = commands.subtracting(served)
    #expect(others.contains("check"), "the positive control: commands outside the table exist")
    for name in others { #expect(ServedVerb.named(name) == nil, "\(name) is served but not in the table") }
  }
}
