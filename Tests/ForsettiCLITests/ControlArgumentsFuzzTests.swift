import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiCLI

/// The control fuzzer's kept inputs replayed through its whole entry, the argument handling
/// included (the crash of issue 26 is one of them), and its dictionary checked against the verbs'
/// own option tables, so a new option is fuzzed the day it is declared.
@Suite(.onTestThreads) struct ControlArgumentsFuzzTests {
  static var inputs: [String] {
    FuzzInputs.paths("Corpus", "control") + FuzzInputs.paths("Regressions", "control")
  }

  @Test(arguments: inputs) func replays(_ path: String) throws {
    let bytes = try #require(PlainFiles.contents(of: path), "\(path) is readable")
    #expect(ControlArgumentsFuzzEntry.run(bytes) == [], "\(path)")
  }

  /// `approve --help` through the socket: the verb's help, nothing run.
  @Test func helpOfEveryServedVerbIsAnsweredNotRun() throws {
    for verb in ControlRequest.verbs.sorted() {
      for help in ["--help", "-h"] {
        let output = CapturedConsole()
        guard
          case .answered(let status) = ControlHandler.admit(
            ControlRequest(verb: verb, arguments: [help]), output.console)
        else {
          Issue.record("\(verb) \(help) was admitted to run")
          continue
        }
        let spec = try #require(ForsettiHostCLI.verbs.first { $0.spec.name == verb }?.spec)
        #expect(status == 0)
        #expect(output.text.0 == ForsettiHostCLI.help(spec), "\(verb) \(help)")
      }
    }
  }

  /// The positive control of the property: a whole request is admitted to run.
  @Test func aWholeRequestIsAdmitted() {
    let output = CapturedConsole()
    guard
      case .run(let verb, let p) = ControlHandler.admit(
        ControlRequest(verb: "approve", arguments: ["--", "com.test.x"]), output.console)
    else {
      Issue.record("approve com.test.x was not admitted: \(output.text)")
      return
    }
    #expect(verb.spec.name == "approve" && p.positionals == ["com.test.x"])
  }

  @Test func theDictionaryHasEveryVerbAndEveryOptionOfEach() throws {
    let path = (HostBinary.packageRoot as NSString).appendingPathComponent("Fuzz/Dictionaries/control.dict")
    let text = try String(contentsOfFile: path, encoding: .utf8)
    for verb in ForsettiHostCLI.verbs.map(\.spec) where ControlRequest.verbs.contains(verb.name) {
      #expect(text.contains("=\"\\\"\(verb.name)\\\"\""), "the verb \(verb.name)")
      for o in verb.options {
        #expect(text.contains("=\"\\\"--\(o.name)\\\"\""), "--\(o.name) of \(verb.name)")
      }
    }
    for word in ["--help", "-h", "--version", "--"] {
      #expect(text.contains("=\"\\\"\(word)\\\"\""), "\(word)")
    }
  }
}
