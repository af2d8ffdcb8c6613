import ForsettiCore

/// The control fuzzer past the JSON: a request that decodes goes on to what the host does with
/// it before anything of the host is touched (`ControlHandler.admit`: the verb's own argument
/// parser, its help, the host-option check). Shared by `Fuzz/` and the regression test that
/// replays its corpus.
public enum ControlArgumentsFuzzEntry {
  /// Runs `bytes` through `ControlFuzzEntry` and the handler's admission; returns the
  /// properties that did not hold (none on a good run).
  public static func run(_ bytes: [UInt8]) -> [String] {
    var broken = ControlFuzzEntry.run(bytes)
    guard case .success(let request) = ControlRequest.decode(bytes) else { return broken }
    let output = CapturedConsole()
    switch ControlHandler.admit(request, output.console) {
    case .answered(let status):
      let (out, err) = output.text
      if status == ExitCode.success.rawValue && out.isEmpty {
        broken.append("answered 0 with nothing to show")
      }
      if status != ExitCode.success.rawValue && err.isEmpty { broken.append("refused without a reason") }
    case .run(let verb, let p):
      if !ControlRequest.verbs.contains(verb.spec.name) {
        broken.append("a verb the host does not serve admitted")
      }
      if p.helpRequested { broken.append("a request for help admitted to run") }
      do { try ArgumentParser.checkPositionals(p, for: verb.spec) } catch {
        broken.append("admitted without the positionals its verb requires: \(error)")
      }
      if verb.spec.options.contains(where: {
        RemoteVerbs.hostOptions.contains($0.name) && (p.values[$0.name] != nil || p.flag($0.name))
      }) {
        broken.append("a host option admitted")
      }
    }
    return broken
  }
}
