import ForsettiBinary
import ForsettiCore
import ForsettiRuntime

/// What `forsetti-host --version` reports: the release, the interfaces this build speaks, and
/// which build it is (the executable's GNU build-id, so a bug report names one binary).
struct BuildIdentity: Equatable, Sendable {
  var version: SemanticVersion
  /// The module ABI modules are compiled against (`FORSETTI_ABI_MAJOR`/`MINOR` of forsetti.h).
  var abiMajor: UInt32
  var abiMinor: UInt32
  /// The version of the host–worker protocol (a worker of another version is refused).
  var workerProtocol: Int
  /// The build-id in lowercase hex; nil when the executable has none or it could not be read.
  var buildID: String?

  /// How many hex digits of the build-id the one-line form shows (as `git` abbreviates).
  static let shortLength = 12

  /// This process: its executable is read through `/proc/self/exe`, wherever it was installed.
  static func current(executable: String = "/proc/self/exe") -> BuildIdentity {
    let id: String? =
      switch GNUBuildID.read(executable) {
      case .success(let bytes?) where !bytes.isEmpty: hex(bytes)
      default: nil
      }
    return BuildIdentity(
      version: ForsettiVersion.current, abiMajor: DynamicLoader.hostABI >> 16,
      abiMinor: DynamicLoader.hostABI & 0xFFFF, workerProtocol: WorkerProtocolVersion.current, buildID: id)
  }

  /// `forsetti-host 0.1.0 (module ABI 1.1, worker protocol 2, build 97cc186f3df5)`.
  func line(program: String) -> String {
    let build = buildID.map { String($0.prefix(Self.shortLength)) } ?? "unknown"
    return
      "\(program) \(version) (module ABI \(abiMajor).\(abiMinor), worker protocol \(workerProtocol), build \(build))"
  }

  /// The same facts as an object; the build-id in full.
  func json(program: String) -> JSONValue {
    [
      "program": .string(program), "version": .string(version.description),
      "moduleABI": .string("\(abiMajor).\(abiMinor)"), "workerProtocol": .number(String(workerProtocol)),
      "buildID": .string(orNull: buildID),
    ]
  }

  static func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
  }
}
