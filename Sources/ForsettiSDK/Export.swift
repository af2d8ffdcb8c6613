import CForsetti
import Glibc
import Synchronization

/// The entry-point helper. A module exports itself with one line:
///
///     @_cdecl("counter_module_entry") public func entry(_ abi: UInt32) -> UnsafeRawPointer? { Forsetti.export(Counter.self, hostABI: abi) }
public enum Forsetti {
  /// The ABI version this SDK was built against.
  public static let abiVersion: UInt32 = (FORSETTI_ABI_MAJOR << 16) | FORSETTI_ABI_MINOR

  /// Creates the module and returns its forsetti.h table, or nil when the host's ABI major
  /// differs (the host then reports loadFailed).
  public static func export<M: ForsettiModule>(_ type: M.Type, hostABI: UInt32) -> UnsafeRawPointer? {
    guard hostABI >> 16 == FORSETTI_ABI_MAJOR else { return nil }
    // The box and its table live as long as the image: the host may read the table until stop
    // returns, and a late callback must still find its context.
    let box = ModuleBox(M())
    return UnsafeRawPointer(box.table)
  }
}

/// Holds module-side objects handed to C as context pointers, released never: the host may
/// call a handler up to the moment the module stops, and a module is not unloaded.
class ModuleBoxBase: @unchecked Sendable {
  // @unchecked: subclasses hold the module, driven from the host's main thread only; the one
  // mutable list here is behind a Mutex.
  private let retained = Mutex<[any AnyObject & Sendable]>([])

  func retain(_ o: some AnyObject & Sendable) -> UnsafeMutableRawPointer {
    retained.withLock { $0.append(o) }
    return Unmanaged.passUnretained(o).toOpaque()
  }

  func start(_ host: UnsafePointer<forsetti_host>) -> Int32 { FORSETTI_ERR_START_FAILED }
  func stop() {}
  func contributions() -> UnsafePointer<forsetti_ui_contributions>? { nil }
  func save(_ write: forsetti_state_writer, _ context: UnsafeMutableRawPointer?) -> Int32 { FORSETTI_OK }
  func restore(_ bytes: [UInt8]) -> Int32 { FORSETTI_OK }
}

final class ModuleBox<M: ForsettiModule>: ModuleBoxBase, @unchecked Sendable {
  // @unchecked: the module instance is driven by the host's main thread only (forsetti.h).
  let module: M
  let table: UnsafeMutablePointer<forsetti_module>
  private var ui: UnsafePointer<forsetti_ui_contributions>?

  init(_ module: M) {
    self.module = module
    let id = M.identity
    let d = UnsafeMutablePointer<forsetti_module_descriptor>.allocate(capacity: 1)
    d.initialize(
      to: forsetti_module_descriptor(
        struct_size: UInt32(MemoryLayout<forsetti_module_descriptor>.size),
        module_id: CStrings.keep(id.moduleID),
        module_type: CStrings.keep(id.kind.rawValue), version_major: id.major, version_minor: id.minor,
        version_patch: id.patch, version_prerelease: id.prerelease.map(CStrings.keep)))
    table = .allocate(capacity: 1)
    super.init()
    table.initialize(
      to: forsetti_module(
        abi_version: Forsetti.abiVersion, struct_size: UInt32(MemoryLayout<forsetti_module>.size),
        descriptor: UnsafePointer(d), self: Unmanaged.passRetained(self as ModuleBoxBase).toOpaque(),
        start: sdkStart, stop: sdkStop, ui_contributions: sdkContributions, save_state: sdkSave,
        restore_state: sdkRestore))
  }

  override func start(_ host: UnsafePointer<forsetti_host>) -> Int32 {
    do throws(ForsettiError) {
      try module.start(Host(raw: host, box: self))
      return FORSETTI_OK
    } catch {
      return error.status < 0 ? error.status : FORSETTI_ERR_START_FAILED
    }
  }

  override func stop() { module.stop() }

  override func contributions() -> UnsafePointer<forsetti_ui_contributions>? {
    if let ui { return ui }
    guard let set = module.uiContributions else { return nil }
    let built = UIContributionTables.build(set)
    ui = built
    return built
  }

  override func save(_ write: forsetti_state_writer, _ context: UnsafeMutableRawPointer?) -> Int32 {
    guard let bytes = module.saveState() else { return FORSETTI_OK }
    return bytes.withUnsafeBytes { write(context, $0.baseAddress, $0.count) }
  }

  override func restore(_ bytes: [UInt8]) -> Int32 {
    module.restoreState(bytes)
    return FORSETTI_OK
  }
}

private func box(_ p: UnsafeMutableRawPointer?) -> ModuleBoxBase? {
  p.map { Unmanaged<ModuleBoxBase>.fromOpaque($0).takeUnretainedValue() }
}

private let sdkStart: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<forsetti_host>?) -> Int32 = {
  s, h in
  guard let b = box(s), let h else { return FORSETTI_ERR_INVALID_ARGUMENT }
  return b.start(h)
}
private let sdkStop: @convention(c) (UnsafeMutableRawPointer?) -> Void = { s in box(s)?.stop() }
private let sdkContributions:
  @convention(c) (UnsafeMutableRawPointer?) -> UnsafePointer<forsetti_ui_contributions>? = {
    s in box(s)?.contributions()
  }
private let sdkSave:
  @convention(c) (UnsafeMutableRawPointer?, forsetti_state_writer?, UnsafeMutableRawPointer?) -> Int32 = {
    s, w, c in
    guard let b = box(s), let w else { return FORSETTI_ERR_INVALID_ARGUMENT }
    return b.save(w, c)
  }
private let sdkRestore: @convention(c) (UnsafeMutableRawPointer?, UnsafeRawPointer?, Int) -> Int32 = {
  s, p, n in
  guard let b = box(s) else { return FORSETTI_ERR_INVALID_ARGUMENT }
  return b.restore(p.map { Array(UnsafeRawBufferPointer(start: $0, count: n)) } ?? [])
}

/// C strings that live for the life of the image (descriptor and UI tables point at them).
enum CStrings {
  static func keep(_ s: String) -> UnsafePointer<CChar> {
    let bytes = s.utf8CString
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
    for (i, c) in bytes.enumerated() { (p + i).initialize(to: c) }
    return UnsafePointer(p)
  }
}

/// Builds the C form of a `UIContributionSet`; allocated once per module, never freed.
enum UIContributionTables {
  static func build(_ s: UIContributionSet) -> UnsafePointer<forsetti_ui_contributions> {
    func array<T>(_ items: [T]) -> UnsafeMutablePointer<T>? {
      guard !items.isEmpty else { return nil }
      let p = UnsafeMutablePointer<T>.allocate(capacity: items.count)
      p.initialize(from: items, count: items.count)
      return p
    }
    let toolbar = s.toolbarItems.map {
      forsetti_toolbar_item(
        item_id: CStrings.keep($0.itemID), title: CStrings.keep($0.title),
        action_route_id: $0.actionRouteID.map(CStrings.keep))
    }
    let views = s.views.map {
      forsetti_view_injection(
        view_id: CStrings.keep($0.viewID), slot_id: CStrings.keep($0.slotID), priority: $0.priority)
    }
    let routes: [UnsafePointer<CChar>?] = s.routes.map(CStrings.keep)
    let pointers: [UnsafePointer<CChar>?] = s.pointers.map(CStrings.keep)
    let tokens = s.themeTokens.map {
      forsetti_theme_token(name: CStrings.keep($0.name), color: CStrings.keep($0.color))
    }
    let c = UnsafeMutablePointer<forsetti_ui_contributions>.allocate(capacity: 1)
    c.initialize(
      to: forsetti_ui_contributions(
        struct_size: UInt32(MemoryLayout<forsetti_ui_contributions>.size), toolbar_items: array(toolbar),
        toolbar_item_count: toolbar.count, view_injections: array(views), view_injection_count: views.count,
        overlay_route_ids: array(routes), overlay_route_count: routes.count,
        overlay_pointer_ids: array(pointers),
        overlay_pointer_count: pointers.count, theme_id: s.themeID.map(CStrings.keep),
        theme_tokens: array(tokens),
        theme_token_count: tokens.count, toolbar_item_size: MemoryLayout<forsetti_toolbar_item>.size,
        view_injection_size: MemoryLayout<forsetti_view_injection>.size,
        theme_token_size: MemoryLayout<forsetti_theme_token>.size))
    return UnsafePointer(c)
  }
}
