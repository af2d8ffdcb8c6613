import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc

/// `STATE/approvals.json`: what the user approved, per module. Every change is one
/// `StateTransaction` (read, change, durable write under `STATE/state.lock`).
package struct ApprovalStore: Sendable {
  package let path: String
  /// The state directory whose lock a change holds.
  package let stateDirectory: String

  package init(stateDirectory: String) {
    self.stateDirectory = stateDirectory
    path = PathText.join(stateDirectory, "approvals.json")
  }

  package enum StoreError: Error, Sendable, CustomStringConvertible {
    case malformed(String)
    case write(AtomicFile.WriteError)
    /// The state directory's lock could not be taken: nothing was changed.
    case lock(StateTransaction.LockError)

    package var description: String {
      switch self {
      case .malformed(let why): why
      case .write(let e): e.description
      case .lock(let e): e.description
      }
    }
  }

  /// Runs `body` as one transaction on this store's state directory.
  func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
    try StateTransaction.run(stateDirectory: stateDirectory, lockFailed: StoreError.lock, body)
  }

  package func load() throws(StoreError) -> ApprovalLedger {
    guard let data = FileManager.default.contents(atPath: path) else { return ApprovalLedger() }
    guard let value = try? JSONParser.parse([UInt8](data)) else { throw .malformed("\(path): invalid JSON") }
    switch ApprovalLedger.decode(value) {
    case .success(let l): return l
    case .failure(let e): throw .malformed("\(path): \(e)")
    }
  }

  package func save(_ ledger: ApprovalLedger) throws(StoreError) {
    let modules = ledger.approved.keys.sorted().map { id in
      (
        id,
        JSONValue.object(
          JSONObject([("capabilities", .strings((ledger.approved[id] ?? []).sorted().map(\.rawValue)))]))
      )
    }
    let doc = JSONValue.object(JSONObject([("version", 1), ("modules", .object(JSONObject(modules)))]))
    do {
      try StateTransaction.write(Array((JSONWriter.string(doc, pretty: true) + "\n").utf8), to: path)
    } catch {
      throw .write(error)
    }
  }

  /// Approves `capabilities` for `moduleID` (added to what was approved).
  package func approve(_ moduleID: String, _ capabilities: Set<Capability>) throws(StoreError) -> Set<
    Capability
  > {
    try transaction { () throws(StoreError) in
      var l = try load()
      l.approved[moduleID, default: []].formUnion(capabilities)
      try save(l)
      return l.approved[moduleID] ?? []
    }
  }

  /// Revokes `capabilities` (all, when nil) of `moduleID`.
  package func revoke(_ moduleID: String, _ capabilities: Set<Capability>?) throws(StoreError) -> Set<
    Capability
  >? {
    try transaction { () throws(StoreError) in
      var l = try load()
      if let capabilities { l.approved[moduleID]?.subtract(capabilities) } else { l.approved[moduleID] = nil }
      try save(l)
      return l.approved[moduleID]
    }
  }

  /// Applies the Apsule reduction rule for manifests as they are now: a module that requests
  /// fewer capabilities than approved has its approval shrunk at once, so a capability dropped
  /// by one version must be approved again if a later version re-adds it.
  package func shrink(to manifests: [ModuleManifest]) throws(StoreError) -> [String] {
    // Nothing to shrink (the common case, judged on every change) takes no lock; whatever is
    // found is judged again under the lock, on the file as it is then.
    guard !Self.reductions(try load(), manifests).isEmpty else { return [] }
    return try transaction { () throws(StoreError) in
      var l = try load()
      let changed = Self.reductions(l, manifests)
      for (id, after) in changed { l.approved[id] = after }
      if !changed.isEmpty { try save(l) }
      return changed.map { $0.0 }
    }
  }

  /// The modules whose approval `manifests` shrink, and the approval each keeps.
  static func reductions(_ l: ApprovalLedger, _ manifests: [ModuleManifest]) -> [(String, Set<Capability>)] {
    manifests.compactMap { m in
      guard let approved = l.approved[m.moduleID] else { return nil }
      let d = ApprovalRules.evaluate(requested: m.capabilitySet, approved: approved)
      guard let after = d.storedAfter, after != approved else { return nil }
      return (m.moduleID, after)
    }
  }
}

/// The two override channels: module IDs and product IDs.
package typealias OverrideChannel = OverrideOrder.Channel

/// `STATE/overrides.json`: the persisted and time-frame override providers of both channels.
/// Version 2 keeps, per channel and ID, one persisted state and any number of windows:
/// `{"version":2,"modules":{"ID":{"state":"off","windows":[{"state":"on","from":"…","until":"…"}]}},"products":{…}}`.
/// Version 1 (one entry per ID; with `from`/`until` it was a window) is read and written back as 2.
package struct OverrideStore: Sendable {
  package let path: String
  /// The state directory whose lock `update` holds.
  package let stateDirectory: String

  package init(stateDirectory: String) {
    self.stateDirectory = stateDirectory
    path = PathText.join(stateDirectory, "overrides.json")
  }

  /// One time-frame window: `state` from `from` (inclusive) until `until` (exclusive); either
  /// bound may be open, not both. The bounds are kept as written (ISO 8601).
  package struct Window: Sendable, Hashable {
    package var state: OverrideState
    package var from: String?
    package var until: String?

    package init(state: OverrideState, from: String? = nil, until: String? = nil) {
      self.state = state
      self.from = from
      self.until = until
    }

    /// The window as the time-frame provider judges it (an unreadable bound counts as open;
    /// `load` and the CLI refuse those before they get here).
    package var span: TimeFrameOverrideProvider.Window {
      .init(state: state, from: from.flatMap(Licence.parseTime), until: until.flatMap(Licence.parseTime))
    }

    /// Whether the two windows share an instant (open bounds reach to the end of time).
    package func overlaps(_ other: Window) -> Bool {
      let (a, b) = (span, other.span)
      let start = max(a.from ?? -.infinity, b.from ?? -.infinity)
      let end = min(a.until ?? .infinity, b.until ?? .infinity)
      return start < end
    }

    /// The same state and the same instants, however the bounds were written.
    package func sameAs(_ other: Window) -> Bool { state == other.state && span == other.span }

    /// `on from 2027-01-01T00:00:00Z until 2027-02-01T00:00:00Z`.
    package var text: String {
      ([state.rawValue] + [from.map { "from \($0)" }, until.map { "until \($0)" }].compactMap { $0 })
        .joined(separator: " ")
    }
  }

  /// What the file says about one ID in one channel.
  package struct Entry: Sendable, Hashable {
    /// The persisted provider's answer; `.unset` when it has none.
    package var state: OverrideState
    /// The time-frame provider's windows, in file order: where several are in effect, the
    /// first decides (the CLI refuses windows of different states that overlap).
    package var windows: [Window]

    package init(state: OverrideState = .unset, windows: [Window] = []) {
      self.state = state
      self.windows = windows
    }

    package var isEmpty: Bool { state == .unset && windows.isEmpty }
  }

  /// The whole file: both channels, ID to entry.
  package struct Content: Sendable, Hashable {
    package var modules: [String: Entry] = [:]
    package var products: [String: Entry] = [:]

    package init(modules: [String: Entry] = [:], products: [String: Entry] = [:]) {
      self.modules = modules
      self.products = products
    }

    /// One channel's entries; setting an empty entry removes the ID.
    package subscript(channel: OverrideChannel) -> [String: Entry] {
      get { channel == .module ? modules : products }
      set {
        let kept = newValue.filter { !$0.value.isEmpty }
        if channel == .module { modules = kept } else { products = kept }
      }
    }

    /// Every instant at which a time-frame window begins or ends.
    package var edges: [Instant] {
      (Array(modules.values) + Array(products.values)).flatMap { e in
        e.windows.flatMap { w in [w.span.from, w.span.until].compactMap { $0 } }
      }
    }
  }

  /// The stored overrides; none when there is no file. A file that is not in its documented
  /// form is an error naming the field, never read as "no overrides": that would start what
  /// was forced off.
  package func load() throws(ApprovalStore.StoreError) -> Content {
    guard FileManager.default.fileExists(atPath: path) else { return Content() }
    guard let data = FileManager.default.contents(atPath: path) else {
      throw .malformed("\(path): cannot be read")
    }
    guard let o = (try? JSONParser.parse([UInt8](data)))?.objectValue else {
      throw .malformed("\(path): invalid JSON (expected {\"version\":2,\"modules\":{…},\"products\":{…}})")
    }
    do {
      return try Self.decode(o)
    } catch {
      throw .malformed("\(path): \(error.field): \(error.expected)")
    }
  }

  /// A field of the file that is not as documented, and what was expected there.
  package struct FormError: Error, Sendable, Hashable {
    package var field: String
    package var expected: String
  }

  /// Reads either version; a missing `version` is read as 1, the form before versions mattered.
  package static func decode(_ o: JSONObject) throws(FormError) -> Content {
    let version: Int
    switch o["version"] {
    case nil: version = 1
    case .some(let v):
      guard let n = v.integerValue, n == 1 || n == 2 else {
        throw FormError(field: "version", expected: "1 or 2")
      }
      version = n
    }
    func table(_ key: String) throws(FormError) -> [String: Entry] {
      guard let members = o[key] else { return [:] }
      guard let t = members.objectValue else {
        throw FormError(field: key, expected: "an object of IDs")
      }
      var out: [String: Entry] = [:]
      for (id, v) in t.members {
        let e = try version == 1 ? entryV1(v, at: "\(key).\(id)") : entryV2(v, at: "\(key).\(id)")
        if !e.isEmpty { out[id] = e }
      }
      return out
    }
    return Content(modules: try table("modules"), products: try table("products"))
  }

  static func state(_ v: JSONValue?, at field: String, unset: Bool) throws(FormError) -> OverrideState {
    guard let s = v?.stringValue.flatMap(OverrideState.init(rawValue:)), unset || s != .unset else {
      throw FormError(field: field, expected: unset ? "on, off or unset" : "on or off")
    }
    return s
  }

  static func instant(_ v: JSONValue?, at field: String) throws(FormError) -> String? {
    guard let v else { return nil }
    guard let s = v.stringValue, Licence.parseTime(s) != nil else {
      throw FormError(field: field, expected: "an ISO 8601 instant such as 2027-01-01T00:00:00Z")
    }
    return s
  }

  /// `{"state":…,"from"?:…,"until"?:…}`: with a bound, the one window of the ID. A window
  /// that can never be in effect (from ≥ until, or unset) is dropped: it decided nothing.
  static func entryV1(_ v: JSONValue, at field: String) throws(FormError) -> Entry {
    guard let e = v.objectValue else { throw FormError(field: field, expected: "an object with state") }
    let s = try state(e["state"], at: field + ".state", unset: true)
    let w = Window(
      state: s, from: try instant(e["from"], at: field + ".from"),
      until: try instant(e["until"], at: field + ".until"))
    if w.from == nil && w.until == nil { return Entry(state: s) }
    let span = w.span
    if s == .unset || (span.from ?? -.infinity) >= (span.until ?? .infinity) { return Entry() }
    return Entry(windows: [w])
  }

  /// `{"state"?:…,"windows"?:[{"state":…,"from"?:…,"until"?:…}, …]}`.
  static func entryV2(_ v: JSONValue, at field: String) throws(FormError) -> Entry {
    guard let e = v.objectValue else {
      throw FormError(field: field, expected: "an object with state and/or windows")
    }
    for k in e.keys where k != "state" && k != "windows" {
      throw FormError(
        field: "\(field).\(k)",
        expected: k == "from" || k == "until"
          ? "no \(k) here in version 2: a time frame is one of windows:[{state,from,until}]"
          : "only state and windows")
    }
    var entry = Entry()
    if e["state"] != nil { entry.state = try state(e["state"], at: field + ".state", unset: true) }
    guard let list = e["windows"] else { return entry }
    guard let items = list.arrayValue else {
      throw FormError(field: field + ".windows", expected: "an array of {state, from, until}")
    }
    for (i, item) in items.enumerated() {
      let at = "\(field).windows[\(i)]"
      guard let w = item.objectValue else {
        throw FormError(field: at, expected: "an object {state, from, until}")
      }
      for k in w.keys where !["state", "from", "until"].contains(k) {
        throw FormError(field: "\(at).\(k)", expected: "only state, from and until")
      }
      let window = Window(
        state: try state(w["state"], at: at + ".state", unset: false),
        from: try instant(w["from"], at: at + ".from"), until: try instant(w["until"], at: at + ".until"))
      if window.from == nil && window.until == nil {
        throw FormError(
          field: at, expected: "from, until or both (a window without bounds is the persisted state)")
      }
      if let f = window.span.from, let u = window.span.until, f >= u {
        throw FormError(field: at + ".until", expected: "an instant after from (\(window.from ?? ""))")
      }
      entry.windows.append(window)
    }
    return entry
  }

  /// The file's text for `c`, in version 2.
  package static func encode(_ c: Content) -> JSONValue {
    func json(_ d: [String: Entry]) -> JSONValue {
      .object(
        JSONObject(
          d.keys.sorted().compactMap { id in
            guard let e = d[id], !e.isEmpty else { return nil }
            var o = JSONObject()
            if e.state != .unset { o["state"] = .string(e.state.rawValue) }
            if !e.windows.isEmpty {
              o["windows"] = .array(
                e.windows.map { w in
                  var wo = JSONObject([("state", .string(w.state.rawValue))])
                  if let f = w.from { wo["from"] = .string(f) }
                  if let u = w.until { wo["until"] = .string(u) }
                  return .object(wo)
                })
            }
            return (id, .object(o))
          }))
    }
    return .object(
      JSONObject([("version", 2), ("modules", json(c.modules)), ("products", json(c.products))]))
  }

  /// Writes `c` as version 2, atomically and durably. Only inside a transaction (`update`):
  /// a save of content loaded earlier would undo changes made since.
  package func save(_ c: Content) throws(AtomicFile.WriteError) {
    try StateTransaction.write(Array((JSONWriter.string(Self.encode(c), pretty: true) + "\n").utf8), to: path)
  }

  /// One transaction: loads the file under `STATE/state.lock`, lets `change` decide (it may
  /// throw its own error to refuse, and nothing is written), saves the result when it differs,
  /// and returns what `change` returned once it is on disk.
  package func update<T, E: Error>(
    mapError: (ApprovalStore.StoreError) -> E, _ change: (inout Content) throws(E) -> T
  ) throws(E) -> T {
    try StateTransaction.run(stateDirectory: stateDirectory, lockFailed: { mapError(.lock($0)) }) {
      () throws(E) -> T in
      let before: Content
      do throws(ApprovalStore.StoreError) { before = try load() } catch { throw mapError(error) }
      var c = before
      let result = try change(&c)
      if c != before {
        do throws(AtomicFile.WriteError) { try save(c) } catch { throw mapError(.write(error)) }
      }
      return result
    }
  }

  /// The two channels in ForgeAccess order: persisted store, in-memory, time-frame.
  package static func channels(
    _ c: Content,
    inMemory: (modules: [String: OverrideState], products: [String: OverrideState]) = ([:], [:])
  ) -> OverrideChannels {
    func providers(_ d: [String: Entry], _ memory: [String: OverrideState]) -> [any OverrideProvider] {
      [
        TableOverrideProvider(
          name: "persisted", table: d.compactMapValues { $0.state == .unset ? nil : $0.state }),
        TableOverrideProvider(name: "in-memory", table: memory),
        TimeFrameOverrideProvider(
          windows: d.compactMapValues { $0.windows.isEmpty ? nil : $0.windows.map(\.span) }),
      ]
    }
    return OverrideChannels(
      module: providers(c.modules, inMemory.modules), product: providers(c.products, inMemory.products))
  }

  /// The two channels of `c` with `inMemory` (the same as `OverrideStore.channels`).
  package func channels(
    _ c: Content,
    inMemory: (modules: [String: OverrideState], products: [String: OverrideState]) = ([:], [:])
  ) -> OverrideChannels {
    Self.channels(c, inMemory: inMemory)
  }
}
