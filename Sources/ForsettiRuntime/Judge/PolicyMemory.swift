import ForsettiCore
import Synchronization

/// A running host's memory of its policy file: the last one that read as valid, and why the one
/// there now does not. An invalid file edited into place must not blind the operator: the host
/// goes on judging with the policy it was running on, and `list`, `explain` and the page keep
/// answering, saying which file is wrong and why (`problem`). Offline tools have none: for
/// them an invalid file is an error, as there is no policy in force to fall back on.
package final class PolicyMemory: Sendable {
  private let state = Mutex<(kept: RuleCapabilityPolicy?, problem: String?)>((nil, nil))

  package init() {}

  /// The file read as valid: kept, and no problem any more.
  func remember(_ policy: RuleCapabilityPolicy) {
    state.withLock { $0 = (policy, nil) }
  }

  /// The file did not read (`error`): the policy kept before, if any, with the problem noted.
  func fallBack(after error: JudgeError) -> RuleCapabilityPolicy? {
    state.withLock { s in
      guard let kept = s.kept else { return nil }
      s.problem = "\(error); judged with the last valid policy until the file is mended"
      return kept
    }
  }

  /// Why the policy in force is not the file as it is now; nil when it is.
  package var problem: String? { state.withLock { $0.problem } }
}
