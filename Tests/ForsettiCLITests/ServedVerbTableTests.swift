import ForsettiCore
import Testing

@testable import ForsettiCLI

/// The command line serves every verb of the protocol's table, and only those, through the one
/// handler each has (`ServedVerb.named`), as a verb of its own command list.
@Suite struct ServedVerbTableTests {
  @Test func everyServedVerbHasItsHandlerAndItsCommand() {
    let commands = Set(ForsettiHostCLI.verbs.map(\.spec.name))
    for verb in ControlVerb.all {
      #expect(ServedVerb.named(verb.name) != nil, "\(verb.name) has no handler")
      #expect(commands.contains(verb.name), "\(verb.name) is no command")
      #expect(RemoteVerbs.writing.contains(verb.name) == verb.writes)
    }
    #expect(ServedVerb.named("check") == nil, "a verb outside the table is not served")
  }
}
