import CForsetti
import ForsettiCore
import Glibc

/// A module whose entry point has run and whose table passed the ABI checks.
public struct LoadedModule: @unchecked Sendable {
  // @unchecked: the table pointer is owned by the module image, which stays mapped for the
  // life of the process (see DynamicLoader); the host reads it only from its main thread.
  public var path: String
  public var table: UnsafePointer<forsetti_module>
  public var descriptor: ModuleDescriptor
  /// Whether the image links the Swift runtime, and so must never be unloaded.
  public var isSwift: Bool
  public var handle: UnsafeMutableRawPointer
}

/// Loads module images. A protocol so tests and isolated workers can supply their own.
public protocol ModuleLoading: Sendable {
  func load(path: String, entryPoint: String, isSwift: Bool) -> Result<LoadedModule, LoadError>
}

/// dlopen/dlsym in this process: the first time module code runs.
///
/// Images are opened `RTLD_NOW | RTLD_LOCAL` (missing symbols fail here, not at a later call;
/// modules cannot see each other's symbols) and never closed: a module may leave threads or
/// callbacks behind, and a closed Swift image crashes the next dynamic cast. Swift images also
/// get `RTLD_NODELETE` so that no later dlclose by anyone can unmap them.
public struct DynamicLoader: ModuleLoading {
  public static let hostABI: UInt32 = (FORSETTI_ABI_MAJOR << 16) | FORSETTI_ABI_MINOR
  /// The table must reach at least through `stop`.
  static let minimumTableSize = MemoryLayout<forsetti_module>.offset(of: \.ui_contributions) ?? 40

  public init() {}

  public func load(path: String, entryPoint: String, isSwift: Bool) -> Result<LoadedModule, LoadError> {
    _ = dlerror()
    let flags = RTLD_NOW | RTLD_LOCAL | (isSwift ? RTLD_NODELETE : 0)
    guard let handle = dlopen(path, flags) else {
      return .failure(.dlopenFailed(path: path, dlerror: Self.lastError()))
    }
    guard let sym = dlsym(handle, entryPoint) else {
      return .failure(.symbolMissing(symbol: entryPoint, dlerror: Self.lastError()))
    }
    let entry = unsafeBitCast(sym, to: forsetti_entry_fn.self)
    guard let table = entry(Self.hostABI) else {
      return .failure(.refused(symbol: entryPoint, hostABI: Self.hostABI))
    }
    switch Self.validate(table) {
    case .failure(let e): return .failure(e)
    case .success(let d):
      return .success(LoadedModule(path: path, table: table, descriptor: d, isSwift: isSwift, handle: handle))
    }
  }

  static func lastError() -> String {
    guard let e = dlerror() else { return "unknown dynamic loader error" }
    return String(cString: e)
  }

  /// Reads the module's table at the boundary: ABI, size, descriptor strings.
  static func validate(_ table: UnsafePointer<forsetti_module>) -> Result<ModuleDescriptor, LoadError> {
    let t = table.pointee
    guard ABIVersion.isSupported(module: t.abi_version, host: hostABI) else {
      return .failure(.abiUnsupported(moduleABI: t.abi_version, hostABI: hostABI))
    }
    guard Int(t.struct_size) >= minimumTableSize else {
      return .failure(.tableTooSmall(size: t.struct_size, needed: minimumTableSize))
    }
    guard t.start != nil, t.stop != nil else {
      return .failure(.tableInvalid("start and stop must not be NULL"))
    }
    guard let dp = t.descriptor else { return .failure(.descriptorInvalid("descriptor is NULL")) }
    let d = dp.pointee
    guard Int(d.struct_size) >= MemoryLayout<forsetti_module_descriptor>.size else {
      return .failure(.descriptorInvalid("struct_size \(d.struct_size) is too small"))
    }
    guard let idPtr = d.module_id, let id = CString.read(idPtr, max: 256) else {
      return .failure(.descriptorInvalid("module_id is NULL, too long or not UTF-8"))
    }
    guard let typePtr = d.module_type, let typeName = CString.read(typePtr, max: 16) else {
      return .failure(.descriptorInvalid("module_type is NULL or not UTF-8"))
    }
    guard let type = ModuleType(rawValue: typeName) else {
      return .failure(.descriptorInvalid("module_type \"\(typeName)\" is not service, ui or app"))
    }
    var pre: String?
    if let p = d.version_prerelease {
      guard let s = CString.read(p, max: 64) else {
        return .failure(.descriptorInvalid("version_prerelease is too long or not UTF-8"))
      }
      pre = s
    }
    let version = SemanticVersion(
      Int(d.version_major), Int(d.version_minor), Int(d.version_patch), prerelease: pre)
    return .success(ModuleDescriptor(moduleID: id, moduleType: type, moduleVersion: version))
  }
}

/// Reading C strings handed over by module code, with a length bound and UTF-8 validation.
public enum CString {
  /// The string at `p` if it is valid UTF-8 and shorter than `max` bytes.
  public static func read(_ p: UnsafePointer<CChar>, max: Int) -> String? {
    let n = strnlen(p, max + 1)
    guard n <= max else { return nil }
    return p.withMemoryRebound(to: UInt8.self, capacity: n) {
      String(validating: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self)
    }
  }
}
