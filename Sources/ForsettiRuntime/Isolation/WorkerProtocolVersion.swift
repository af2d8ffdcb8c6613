import ForsettiBridge

/// The version of the protocol this build's host and worker speak, for clients of the runtime
/// that report it (`forsetti-host --version`) without reaching into the bridge.
package enum WorkerProtocolVersion {
  package static let current: Int = ProtocolVersion.current
}
