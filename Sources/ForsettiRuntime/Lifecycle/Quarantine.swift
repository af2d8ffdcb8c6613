import ForsettiBridge
import ForsettiCore
import FoundationEssentials
import Glibc

/// `quarantine.json` in the state directory: modules that crashed past the restart limit,
/// keyed by module ID and the identity of the binary that crashed. Changed only through
/// `update`, one `StateTransaction`, so a host never loses another's entry or lift.
package struct QuarantineStore: Sendable {
  package struct Entry: Sendable, Hashable {
    package var path: String
    package var identity: BinaryIdentity
    package var crashes: Int
    package var lastFailure: String
  }

  package let path: String
  /// The state directory whose lock `update` holds.
  package let stateDirectory: String

  package init(stateDirectory: String) {
    self.stateDirectory = stateDirectory
    path = PathText.join(stateDirectory, "quarantine.json")
  }

  /// Why a change to the quarantine could not be made.
  package enum UpdateError: Error, Sendable, Hashable, CustomStringConvertible {
    case lock(StateTransaction.LockError)
    case write(AtomicFile.WriteError)

    package var description: String {
      switch self {
      case .lock(let e): e.description
      case .write(let e): e.description
      }
    }
  }

  /// One transaction: the entries as they are on disk under `STATE/state.lock`, changed by
  /// `change`, written back durably when they differ.
  package func update(_ change: (inout [String: Entry]) -> Void) throws(UpdateError) {
    try StateTransaction.run(stateDirectory: stateDirectory, lockFailed: UpdateError.lock) {
      () throws(UpdateError) in
      let before = load()
      var entries = before
      change(&entries)
      guard entries != before else { return }
      do throws(AtomicFile.WriteError) { try save(entries) } catch { throw .write(error) }
    }
  }

  /// Why module `moduleID` may not load from `path`: quarantined, while that binary is the one
  /// that crashed. nil when it may; an entry for a binary since changed is lifted (logged).
  func refusal(of moduleID: String, path: String, environment: HostEnvironment) -> String? {
    guard let e = load()[moduleID] else { return nil }
    if e.path == path, let now = BinaryIdentity.of(path), now == e.identity {
      return
        "quarantined after \(e.crashes) crashes (last: \(e.lastFailure)); rebuild or replace \(path) to lift it"
    }
    // Only the entry judged here is lifted, not one written meanwhile for another binary.
    try? update { if $0[moduleID] == e { $0[moduleID] = nil } }
    environment.hostLog(.info, "quarantine of \(moduleID) lifted: \(path) changed", subject: moduleID)
    return nil
  }

  package func load() -> [String: Entry] {
    // Read at every load (a reload included): plain reads, not Foundation's, and an absent file
    // costs one failed open.
    guard let data = PlainFiles.contents(of: path),
      let modules = (try? JSONParser.parse(data))?.objectValue?["modules"]?.objectValue
    else { return [:] }
    var out: [String: Entry] = [:]
    for (id, v) in modules.members {
      guard let o = v.objectValue, let p = o["path"]?.stringValue, let size = o["size"]?.integerValue,
        let mtime = o["mtimeNanoseconds"]?.integerValue,
        let hash = o["hash"]?.stringValue.flatMap({ UInt64($0, radix: 16) })
      else { continue }
      out[id] = Entry(
        path: p, identity: BinaryIdentity(size: size, mtimeNanoseconds: Int64(mtime), hash: hash),
        crashes: o["crashes"]?.integerValue ?? 0, lastFailure: o["lastFailure"]?.stringValue ?? "")
    }
    return out
  }

  /// Replaces the file with `entries`. Only inside a transaction (`update`).
  package func save(_ entries: [String: Entry]) throws(AtomicFile.WriteError) {
    let modules = entries.keys.sorted().compactMap { id -> (String, JSONValue)? in
      guard let e = entries[id] else { return nil }
      return (
        id,
        .object(
          JSONObject([
            ("path", .string(e.path)), ("size", .number(String(e.identity.size))),
            ("mtimeNanoseconds", .number(String(e.identity.mtimeNanoseconds))),
            ("hash", .string(String(e.identity.hash, radix: 16))), ("crashes", .number(String(e.crashes))),
            ("lastFailure", .string(e.lastFailure)),
          ]))
      )
    }
    let doc = JSONValue.object(JSONObject([("version", 1), ("modules", .object(JSONObject(modules)))]))
    try StateTransaction.write(Array((JSONWriter.string(doc, pretty: true) + "\n").utf8), to: path)
  }
}
