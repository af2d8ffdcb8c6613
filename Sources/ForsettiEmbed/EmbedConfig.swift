import CForsetti
import ForsettiCore
import ForsettiHost
import ForsettiRuntime

/// The object behind `forsetti_embed_config *`: the settings a host is made from, kept until
/// `forsetti_embed_host_new` turns them into the facade's configuration.
final class EmbedConfig {
  var manifestsDirectory: String?
  var pluginDirectories: [String] = []
  var stateDirectory: String?
  var inProcess = false
  /// nil: the worker installed with the library (`WorkerLocation`).
  var workerExecutable: String?
  var approveAll = false
  var logToStandardError = false
  var entitlements: CCallback<EntitlementFunction>?
  var policy: CCallback<PolicyFunction>?
  var services: [ApplicationService] = []
  /// `forsetti_embed_config_set`'s keys and values, in the order given (a repeatable key adds).
  var settings: [(key: String, value: String)] = []

  /// The facade's configuration, or what is missing.
  func configuration() throws(EmbedFailure) -> ForsettiHost.Configuration {
    guard let manifestsDirectory else { throw .missingSetting("manifests directory (set_manifests_dir)") }
    guard let stateDirectory else { throw .missingSetting("state directory (set_state_dir)") }
    guard !pluginDirectories.isEmpty else { throw .missingSetting("plugins directory (add_plugins_dir)") }
    var c = ForsettiHost.Configuration(
      manifestsDirectory: manifestsDirectory, pluginDirectories: pluginDirectories,
      stateDirectory: stateDirectory)
    c.judging.approveAll = approveAll
    if let entitlements { c.judging.entitlementSource = CallbackEntitlements(callback: entitlements) }
    if let policy { c.judging.policy = CallbackPolicy(callback: policy) }
    // The facade's default is a worker beside the executable: never the application's.
    c.isolation = nil
    if !inProcess {
      let worker: String
      if let chosen = workerExecutable {
        worker = chosen
      } else {
        worker = try WorkerLocation.besideLibrary()
      }
      c.isolation = IsolationSettings(workerExecutable: worker)
    }
    if logToStandardError { c.logSinks = [JournalLogSink.selected(fd: 2)] }
    for (key, value) in settings {
      do throws(SettingProblem) { try c.set(key, to: value) } catch {
        throw .invalidValue(key, value: value, why: "\(error.setting): \(error.why)")
      }
    }
    return c
  }

  /// The settings given so far applied to a configuration with isolation on (so that every key
  /// is checked), kept between calls: each `set` is checked against it in constant time, not by
  /// applying every earlier setting again.
  private var checked: ForsettiHost.Configuration = {
    var c = ForsettiHost.Configuration(manifestsDirectory: "m", pluginDirectories: [], stateDirectory: "s")
    c.isolation = IsolationSettings(workerExecutable: "forsetti-worker")
    return c
  }()

  /// Refuses `value` for `key` as `host_new` would, naming the key and the configuration's
  /// field; keeps it when it passes (`settings` then holds it too).
  func check(_ key: String, _ value: String) throws(EmbedFailure) {
    guard SettingKey.named(key) != nil else {
      throw .invalidValue(
        key, value: value,
        why: "no such setting (one of: \(SettingKey.all.map(\.key).joined(separator: ", ")))")
    }
    var next = checked
    if key != "in-process" {
      do throws(SettingProblem) { try next.set(key, to: value) } catch {
        throw .invalidValue(
          key, value: value, why: error.setting == key ? error.why : "\(error.setting): \(error.why)")
      }
    }
    if let problem = next.settingProblems.first(where: { SettingKey.owning($0.setting)?.key == key }) {
      let why = SettingKey.named(key)?.explained(problem.why) ?? problem.why
      throw .invalidValue(key, value: value, why: "\(problem.setting): \(why)")
    }
    checked = next
  }

  /// Runs `body` on the configuration behind `handle`, as a C setter.
  static func edit(_ handle: OpaquePointer?, _ body: (EmbedConfig) throws(EmbedFailure) -> Void)
    -> OpaquePointer?
  {
    EmbedError.outcome { () throws(EmbedFailure) in
      try body(Handle.borrow(handle, "config", as: EmbedConfig.self))
    }
  }
}

/// A new configuration the caller owns.
@_cdecl("forsetti_embed_config_new")
public func forsettiEmbedConfigNew() -> OpaquePointer? { Handle.give(EmbedConfig()) }

/// Frees a configuration; NULL is ignored.
@_cdecl("forsetti_embed_config_delete")
public func forsettiEmbedConfigDelete(_ config: OpaquePointer?) {
  guard let config else { return }
  Handle.release(config, as: EmbedConfig.self)
}

/// Sets the manifests directory.
@_cdecl("forsetti_embed_config_set_manifests_dir")
public func forsettiEmbedConfigSetManifestsDir(_ config: OpaquePointer?, _ path: UnsafePointer<CChar>?)
  -> OpaquePointer?
{
  EmbedConfig.edit(config) { c throws(EmbedFailure) in c.manifestsDirectory = try CText.nonEmpty(path, "path")
  }
}

/// Adds a plugins directory.
@_cdecl("forsetti_embed_config_add_plugins_dir")
public func forsettiEmbedConfigAddPluginsDir(_ config: OpaquePointer?, _ path: UnsafePointer<CChar>?)
  -> OpaquePointer?
{
  EmbedConfig.edit(config) { c throws(EmbedFailure) in
    c.pluginDirectories.append(try CText.nonEmpty(path, "path"))
  }
}

/// Sets the state directory.
@_cdecl("forsetti_embed_config_set_state_dir")
public func forsettiEmbedConfigSetStateDir(_ config: OpaquePointer?, _ path: UnsafePointer<CChar>?)
  -> OpaquePointer?
{
  EmbedConfig.edit(config) { c throws(EmbedFailure) in c.stateDirectory = try CText.nonEmpty(path, "path") }
}

/// Chooses modules in the application's process (true) or in workers (false).
@_cdecl("forsetti_embed_config_set_in_process")
public func forsettiEmbedConfigSetInProcess(_ config: OpaquePointer?, _ inProcess: Bool) -> OpaquePointer? {
  EmbedConfig.edit(config) { c in c.inProcess = inProcess }
}

/// Sets the worker executable; NULL: the one installed with the library.
@_cdecl("forsetti_embed_config_set_worker")
public func forsettiEmbedConfigSetWorker(_ config: OpaquePointer?, _ path: UnsafePointer<CChar>?)
  -> OpaquePointer?
{
  EmbedConfig.edit(config) { c throws(EmbedFailure) in
    c.workerExecutable = path == nil ? nil : try CText.nonEmpty(path, "path")
  }
}

/// Sets a host setting by its host.conf key (`memory-limit`, `application-id`, …) from text.
@_cdecl("forsetti_embed_config_set")
public func forsettiEmbedConfigSet(
  _ config: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?
) -> OpaquePointer? {
  EmbedConfig.edit(config) { c throws(EmbedFailure) in
    let name = try CText.nonEmpty(key, "key")
    let text = try CText.read(value, "value")
    try c.check(name, text)
    c.settings.append((name, text))
  }
}

/// Treats every requested capability as approved, or not.
@_cdecl("forsetti_embed_config_set_approve_all")
public func forsettiEmbedConfigSetApproveAll(_ config: OpaquePointer?, _ approveAll: Bool) -> OpaquePointer? {
  EmbedConfig.edit(config) { c in c.approveAll = approveAll }
}

/// Sends the host's log to standard error, or nowhere.
@_cdecl("forsetti_embed_config_set_log_to_stderr")
public func forsettiEmbedConfigSetLogToStderr(_ config: OpaquePointer?, _ log: Bool) -> OpaquePointer? {
  EmbedConfig.edit(config) { c in c.logToStandardError = log }
}

/// Sets (or with NULL removes) the entitlement callback.
@_cdecl("forsetti_embed_config_set_entitlement_callback")
public func forsettiEmbedConfigSetEntitlementCallback(
  _ config: OpaquePointer?, _ callback: EntitlementFunction?, _ context: UnsafeMutableRawPointer?
) -> OpaquePointer? {
  EmbedConfig.edit(config) { c in c.entitlements = callback.map { CCallback($0, context) } }
}

/// Sets (or with NULL removes) the capability-policy callback.
@_cdecl("forsetti_embed_config_set_policy_callback")
public func forsettiEmbedConfigSetPolicyCallback(
  _ config: OpaquePointer?, _ callback: PolicyFunction?, _ context: UnsafeMutableRawPointer?
) -> OpaquePointer? {
  EmbedConfig.edit(config) { c in c.policy = callback.map { CCallback($0, context) } }
}

/// Adds an application service modules resolve by ID behind a capability.
@_cdecl("forsetti_embed_config_add_service")
public func forsettiEmbedConfigAddService(
  _ config: OpaquePointer?, _ serviceID: UnsafePointer<CChar>?, _ capability: UnsafePointer<CChar>?,
  _ handler: forsetti_role_handler?, _ context: UnsafeMutableRawPointer?
) -> OpaquePointer? {
  EmbedConfig.edit(config) { c throws(EmbedFailure) in
    let id = try CText.nonEmpty(serviceID, "service_id")
    let name = try CText.read(capability, "capability")
    guard let handler else { throw .nullArgument("handler") }
    guard let capability = Capability(rawValue: name) else {
      throw .invalidValue(
        "capability", value: name,
        why: "no such capability (one of: \(Capability.allCases.map(\.rawValue).joined(separator: ", ")))")
    }
    guard !c.services.contains(where: { $0.id == id }) else {
      throw .invalidValue("service_id", value: id, why: "added already")
    }
    c.services.append(
      try CallbackService.make(id: id, capability: capability, handler: CCallback(handler, context)))
  }
}
