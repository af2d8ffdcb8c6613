import ForsettiBridge
import ForsettiCore
import Foundation

/// `STATE/approvals.json`: what the user approved, per module, written atomically.
public struct ApprovalStore: Sendable {
  public let path: String

  public init(stateDirectory: String) {
    path = (stateDirectory as NSString).appendingPathComponent("approvals.json")
  }

  public enum StoreError: Error, Sendable, CustomStringConvertible {
    case malformed(String)
    case write(AtomicFile.WriteError)

    public var description: String {
      switch self {
      case .malformed(let why): why
      case .write(let e): e.description
      }
    }
  }

  public func load() throws(StoreError) -> ApprovalLedger {
    guard let data = FileManager.default.contents(atPath: path) else { return ApprovalLedger() }
    guard let value = try? JSONParser.parse([UInt8](data)) else { throw .malformed("\(path): invalid JSON") }
    switch ApprovalLedger.decode(value) {
    case .success(let l): return l
    case .failure(let e): throw .malformed("\(path): \(e)")
    }
  }

  public func save(_ ledger: ApprovalLedger) throws(StoreError) {
    let modules = ledger.approved.keys.sorted().map { id in
      (
        id,
        JSONValue.object(
          JSONObject([("capabilities", .strings((ledger.approved[id] ?? []).sorted().map(\.rawValue)))]))
      )
    }
    let doc = JSONValue.object(JSONObject([("version", 1), ("modules", .object(JSONObject(modules)))]))
    do { try AtomicFile.write(Array((JSONWriter.string(doc, pretty: true) + "\n").utf8), to: path) } catch {
      throw .write(error)
    }
  }

  /// Approves `capabilities` for `moduleID` (added to what was approved).
  public func approve(_ moduleID: String, _ capabilities: Set<Capability>) throws(StoreError) -> Set<
    Capability
  > {
    var l = try load()
    l.approved[moduleID, default: []].formUnion(capabilities)
    try save(l)
    return l.approved[moduleID] ?? []
  }

  /// Revokes `capabilities` (all, when nil) of `moduleID`.
  public func revoke(_ moduleID: String, _ capabilities: Set<Capability>?) throws(StoreError) -> Set<
    Capability
  >? {
    var l = try load()
    if let capabilities { l.approved[moduleID]?.subtract(capabilities) } else { l.approved[moduleID] = nil }
    try save(l)
    return l.approved[moduleID]
  }

  /// Applies the Apsule reduction rule for manifests as they are now: a module that requests
  /// fewer capabilities than approved has its approval shrunk at once, so a capability dropped
  /// by one version must be approved again if a later version re-adds it.
  public func shrink(to manifests: [ModuleManifest]) throws(StoreError) -> [String] {
    var l = try load()
    var changed: [String] = []
    for m in manifests {
      guard let approved = l.approved[m.moduleID] else { continue }
      let d = ApprovalRules.evaluate(requested: m.capabilitySet, approved: approved)
      if let after = d.storedAfter, after != approved {
        l.approved[m.moduleID] = after
        changed.append(m.moduleID)
      }
    }
    if !changed.isEmpty { try save(l) }
    return changed
  }
}

/// `STATE/overrides.json`: persisted overrides for both channels; entries with `from`/`until`
/// form the time-frame provider, the rest the persisted one.
public struct OverrideStore: Sendable {
  public let path: String

  public init(stateDirectory: String) {
    path = (stateDirectory as NSString).appendingPathComponent("overrides.json")
  }

  public struct Entry: Sendable, Hashable {
    public var state: OverrideState
    public var from: String?
    public var until: String?

    public init(state: OverrideState, from: String? = nil, until: String? = nil) {
      self.state = state
      self.from = from
      self.until = until
    }
  }

  public struct Content: Sendable, Hashable {
    public var modules: [String: Entry] = [:]
    public var products: [String: Entry] = [:]

    /// Every instant at which a time-frame override begins or ends.
    public var edges: [Instant] {
      (Array(modules.values) + Array(products.values)).flatMap { e in
        [e.from, e.until].compactMap { $0.flatMap(Licence.parseTime) }
      }
    }
  }

  /// The stored overrides; none when there is no file. A file that is not in its documented
  /// form is an error, never read as "no overrides": that would start what was forced off.
  public func load() throws(ApprovalStore.StoreError) -> Content {
    guard FileManager.default.fileExists(atPath: path) else { return Content() }
    guard let data = FileManager.default.contents(atPath: path) else {
      throw .malformed("\(path): cannot be read")
    }
    guard let o = (try? JSONParser.parse([UInt8](data)))?.objectValue else {
      throw .malformed("\(path): invalid JSON (expected {\"version\":1,\"modules\":{…},\"products\":{…}})")
    }
    func entries(_ key: String) throws(ApprovalStore.StoreError) -> [String: Entry] {
      var out: [String: Entry] = [:]
      guard let members = o[key] else { return out }
      guard let table = members.objectValue else { throw .malformed("\(path): \(key): expected an object") }
      for (id, v) in table.members {
        guard let e = v.objectValue, let s = e["state"]?.stringValue.flatMap(OverrideState.init(rawValue:))
        else {
          throw .malformed("\(path): \(key).\(id).state: expected on, off or unset")
        }
        for bound in ["from", "until"] {
          if let t = e[bound], t.stringValue.flatMap(Licence.parseTime) == nil {
            throw .malformed("\(path): \(key).\(id).\(bound): expected an ISO 8601 instant")
          }
        }
        out[id] = Entry(state: s, from: e["from"]?.stringValue, until: e["until"]?.stringValue)
      }
      return out
    }
    return Content(modules: try entries("modules"), products: try entries("products"))
  }

  public func save(_ c: Content) throws(AtomicFile.WriteError) {
    func json(_ d: [String: Entry]) -> JSONValue {
      .object(
        JSONObject(
          d.keys.sorted().compactMap { id in
            guard let e = d[id] else { return nil }
            var o = JSONObject([("state", .string(e.state.rawValue))])
            if let f = e.from { o["from"] = .string(f) }
            if let u = e.until { o["until"] = .string(u) }
            return (id, .object(o))
          }))
    }
    let doc = JSONValue.object(
      JSONObject([("version", 1), ("modules", json(c.modules)), ("products", json(c.products))]))
    try AtomicFile.write(Array((JSONWriter.string(doc, pretty: true) + "\n").utf8), to: path)
  }

  /// The two channels in ForgeAccess order: persisted store, in-memory, time-frame.
  public func channels(
    _ c: Content,
    inMemory: (modules: [String: OverrideState], products: [String: OverrideState]) = ([:], [:])
  )
    -> OverrideChannels
  {
    func split(_ d: [String: Entry]) -> (TableOverrideProvider, TimeFrameOverrideProvider) {
      var table: [String: OverrideState] = [:]
      var windows: [String: [TimeFrameOverrideProvider.Window]] = [:]
      for (id, e) in d {
        if e.from == nil && e.until == nil {
          table[id] = e.state
        } else {
          windows[id, default: []].append(
            .init(
              state: e.state, from: e.from.flatMap(Licence.parseTime),
              until: e.until.flatMap(Licence.parseTime)))
        }
      }
      return (
        TableOverrideProvider(name: "persisted", table: table), TimeFrameOverrideProvider(windows: windows)
      )
    }
    let (mt, mw) = split(c.modules)
    let (pt, pw) = split(c.products)
    return OverrideChannels(
      module: [mt, TableOverrideProvider(name: "in-memory", table: inMemory.modules), mw],
      product: [pt, TableOverrideProvider(name: "in-memory", table: inMemory.products), pw])
  }
}
