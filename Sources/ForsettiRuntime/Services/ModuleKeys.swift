import ForsettiBridge
import ForsettiCore

/// Each module's secret keys, made by the host when first needed and kept beneath the state
/// directory, outside every sandbox; no key ever reaches a module.
final class ModuleKeys: Sendable {
  let stateDirectory: String

  init(stateDirectory: String) { self.stateDirectory = stateDirectory }
}
