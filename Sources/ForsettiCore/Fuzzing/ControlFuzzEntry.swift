/// What the control-socket fuzzer does with one input, shared by the libFuzzer target (`Fuzz/`)
/// and the regression test that replays its corpus.
public enum ControlFuzzEntry {
  /// Reads `bytes` as a host reads a client's request line and as a client reads a host's
  /// answer; returns the properties that did not hold (none on a good run).
  public static func run(_ bytes: [UInt8]) -> [String] {
    var broken: [String] = []
    switch ControlRequest.decode(bytes) {
    case .success(let request):
      // What a client writes, a host reads back as the same request.
      if ControlRequest.decode(Array(request.line.dropLast())) != .success(request) {
        broken.append("request round trip")
      }
      if !ControlRequest.verbs.contains(request.verb) {
        broken.append("a verb the host does not serve passed")
      }
    case .failure(let e):
      if e.description.isEmpty { broken.append("refused without a reason") }
      if e.code != .usage { broken.append("a request refused with \(e.code), not usage") }
    }
    if case .success(let answer) = ControlResponse.decode(bytes) {
      if ControlResponse.decode(Array(answer.line.dropLast())) != .success(answer) {
        broken.append("answer round trip")
      }
    }
    return broken
  }
}
