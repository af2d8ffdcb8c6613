import ForsettiBinary
import ForsettiCore

/// What `explain` says of a module's own libraries: where the loader will find each, and which
/// directories its worker is granted for them (`LibraryGrants`, the rule the host applies).
struct LibraryGrantReport {
  var resolution: LibraryResolver.Resolution
  var grants: LibraryGrants

  /// nil without the module's binary (no --plugins, or no file exports its entry point).
  static func make(_ m: ModuleManifest?, index: BinaryIndex?, stateDirectory: String) -> LibraryGrantReport? {
    guard let m, let index, case .success(let facts) = index.locate(entryPoint: m.entryPoint) else {
      return nil
    }
    let resolution = LibraryFactsCache.shared.resolver().resolve(facts, path: facts.path)
    // explain knows no --export-dir: the state directory is the one it can protect here.
    let protected = [LibraryResolver.realPath(stateDirectory) ?? stateDirectory]
    return LibraryGrantReport(
      resolution: resolution, grants: LibraryGrants.decide(resolution, protected: protected))
  }

  var json: JSONValue {
    let refused: [JSONValue] = grants.refused.map {
      ["directory": .string($0.directory), "library": .string($0.library), "reason": .string($0.reason)]
    }
    let missing: [JSONValue] = grants.missing.map {
      [
        "name": .string($0.name), "neededBy": .string($0.neededBy), "searched": .strings($0.searched),
        "unusable": $0.unusable.map(JSONValue.string) ?? .null,
      ]
    }
    let found: [JSONValue] = resolution.found.map {
      [
        "name": .string($0.name), "neededBy": .string($0.neededBy), "path": .string($0.path),
        "realPath": .string($0.realPath), "via": .string($0.source.rawValue),
      ]
    }
    return [
      "summary": .string(grants.summary), "granted": .strings(grants.granted), "refused": .array(refused),
      "missing": .array(missing),
      "found": .array(found),
    ]
  }
}
