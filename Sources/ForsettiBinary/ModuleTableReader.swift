import CForsetti
import ForsettiCore

/// Reads what a loaded module's table offers beyond its descriptor, validating at the boundary.
public enum ModuleTableReader {
  /// Lists longer than this are refused as implausible.
  static let maxItems = 256
  /// The size of an ABI 1.0 `forsetti_ui_contributions`: it ends where the first 1.1 field starts.
  static let abi10ContributionsSize =
    MemoryLayout<forsetti_ui_contributions>.offset(of: \.toolbar_item_size)
    ?? MemoryLayout<forsetti_ui_contributions>.size

  /// The module's UI contributions: nil when it offers none (NULL function, older table).
  public static func uiContributions(_ m: LoadedModule) -> Result<UIContributions?, LoadError> {
    let t = m.table.pointee
    let needed =
      (MemoryLayout<forsetti_module>.offset(of: \.ui_contributions) ?? 0)
      + MemoryLayout<UnsafeRawPointer>.size
    guard Int(t.struct_size) >= needed, let fn = t.ui_contributions, let cp = fn(t.`self`) else {
      return .success(nil)
    }
    // Only the part the module built is read (a 1.0 module's struct ends before the element
    // sizes); the rest stays zero, which the ABI defines as "the ABI 1.0 value".
    // `struct_size` comes first; `pointee` would read the host's whole struct, past a 1.0 one.
    let built = Int(UnsafeRawPointer(cp).load(as: UInt32.self))
    guard built >= abi10ContributionsSize else {
      return .failure(
        .uiContributionsInvalid(
          "struct_size \(built) is too small (ABI 1.0 forsetti_ui_contributions is \(abi10ContributionsSize) bytes)"
        ))
    }
    var c = forsetti_ui_contributions()
    withUnsafeMutableBytes(of: &c) { dst in
      dst.copyMemory(from: UnsafeRawBufferPointer(start: cp, count: min(built, dst.count)))
    }
    func str(_ p: UnsafePointer<CChar>?, _ what: String) throws(LoadError) -> String {
      guard let p, let s = CString.read(p, max: 256) else {
        throw .uiContributionsInvalid("\(what) is NULL or not UTF-8")
      }
      return s
    }
    func count(_ n: Int, _ what: String) throws(LoadError) -> Int {
      guard n >= 0, n <= maxItems else { throw .uiContributionsInvalid("\(n) \(what) (at most \(maxItems))") }
      return n
    }
    do throws(LoadError) {
      var out = UIContributions()
      if let items = c.toolbar_items {
        let array = try UIElementArray<forsetti_toolbar_item>(
          items, count: try count(c.toolbar_item_count, "toolbar items"), declaredSize: c.toolbar_item_size,
          field: "toolbar_item_size")
        for it in array.elements {
          out.toolbarItems.append(
            ToolbarItem(
              itemID: try str(it.item_id, "toolbar item_id"), title: try str(it.title, "toolbar title"),
              actionRouteID: try it.action_route_id.map { p throws(LoadError) in try str(p, "action_route_id")
              }))
        }
      }
      if let views = c.view_injections {
        let array = try UIElementArray<forsetti_view_injection>(
          views, count: try count(c.view_injection_count, "view injections"),
          declaredSize: c.view_injection_size,
          field: "view_injection_size")
        for v in array.elements {
          out.viewInjections.append(
            ViewInjection(
              viewID: try str(v.view_id, "view_id"), slotID: try str(v.slot_id, "slot_id"),
              priority: Int(v.priority)))
        }
      }
      var routes: [String] = []
      var pointers: [String] = []
      if let r = c.overlay_route_ids {
        for i in 0..<(try count(c.overlay_route_count, "overlay routes")) {
          routes.append(try str(r[i], "overlay route"))
        }
      }
      if let p = c.overlay_pointer_ids {
        for i in 0..<(try count(c.overlay_pointer_count, "overlay pointers")) {
          pointers.append(try str(p[i], "overlay pointer"))
        }
      }
      if !routes.isEmpty || !pointers.isEmpty {
        out.overlay = OverlaySchema(routes: routes, pointers: pointers)
      }
      if let themeID = c.theme_id {
        var tokens: [String: String] = [:]
        if let tk = c.theme_tokens {
          let array = try UIElementArray<forsetti_theme_token>(
            tk, count: try count(c.theme_token_count, "theme tokens"), declaredSize: c.theme_token_size,
            field: "theme_token_size")
          for t in array.elements {
            tokens[try str(t.name, "theme token name")] = try str(t.color, "theme token color")
          }
        }
        out.themeMask = ThemeMask(themeID: try str(themeID, "theme_id"), tokens: tokens)
      }
      return .success(out)
    } catch {
      return .failure(error)
    }
  }
}

/// One of a module's UI arrays, stepped through by the element size the module built (ABI 1.1),
/// so the element structs can grow at their end as CLAP's do: the host reads the fields it knows.
struct UIElementArray<Element> {
  /// Larger elements are refused as implausible (an element holds a few pointers).
  static var maxElementSize: Int { 4096 }
  /// The ABI 1.0 size of one element: this host's own, pinned to the 1.0 layout by abi_checks.c.
  static var abi10ElementSize: Int { MemoryLayout<Element>.size }

  /// The elements, each read from the start of its slot.
  let elements: [Element]

  /// `declaredSize` is the module's `*_size` field: 0 (or absent, read as 0) is the 1.0 size.
  init(_ base: UnsafePointer<Element>, count: Int, declaredSize: Int, field: String) throws(LoadError) {
    let name = String(describing: Element.self)
    guard declaredSize >= 0, declaredSize <= Self.maxElementSize else {
      throw .uiContributionsInvalid(
        "\(field) \(UInt(bitPattern: declaredSize)) is above \(Self.maxElementSize) bytes; set it to sizeof(\(name))"
      )
    }
    let size = declaredSize == 0 ? Self.abi10ElementSize : declaredSize
    guard size >= Self.abi10ElementSize else {
      throw .uiContributionsInvalid(
        "\(field) \(declaredSize) is below the ABI 1.0 size of \(name) (\(Self.abi10ElementSize) bytes); set it to sizeof(\(name))"
      )
    }
    guard size % MemoryLayout<Element>.alignment == 0 else {
      throw .uiContributionsInvalid(
        "\(field) \(declaredSize) is not a multiple of the alignment of \(name) (\(MemoryLayout<Element>.alignment)); set it to sizeof(\(name))"
      )
    }
    let raw = UnsafeRawPointer(base)
    // count ≤ ModuleTableReader.maxItems and size ≤ maxElementSize: the offsets cannot overflow.
    elements = (0..<count).map { raw.load(fromByteOffset: $0 * size, as: Element.self) }
  }
}
