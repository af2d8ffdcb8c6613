import CForsetti
import ForsettiCore

/// Reads what a loaded module's table offers beyond its descriptor, validating at the boundary.
public enum ModuleTableReader {
  /// Lists longer than this are refused as implausible.
  static let maxItems = 256

  /// The module's UI contributions: nil when it offers none (NULL function, older table).
  public static func uiContributions(_ m: LoadedModule) -> Result<UIContributions?, LoadError> {
    let t = m.table.pointee
    let needed =
      (MemoryLayout<forsetti_module>.offset(of: \.ui_contributions) ?? 0)
      + MemoryLayout<UnsafeRawPointer>.size
    guard Int(t.struct_size) >= needed, let fn = t.ui_contributions, let cp = fn(t.`self`) else {
      return .success(nil)
    }
    let c = cp.pointee
    guard c.struct_size >= UInt32(MemoryLayout<forsetti_ui_contributions>.size) else {
      return .failure(.uiContributionsInvalid("struct_size \(c.struct_size) is too small"))
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
        for i in 0..<(try count(c.toolbar_item_count, "toolbar items")) {
          let it = items[i]
          out.toolbarItems.append(
            ToolbarItem(
              itemID: try str(it.item_id, "toolbar item_id"), title: try str(it.title, "toolbar title"),
              actionRouteID: try it.action_route_id.map { p throws(LoadError) in try str(p, "action_route_id")
              }))
        }
      }
      if let views = c.view_injections {
        for i in 0..<(try count(c.view_injection_count, "view injections")) {
          let v = views[i]
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
          for i in 0..<(try count(c.theme_token_count, "theme tokens")) {
            tokens[try str(tk[i].name, "theme token name")] = try str(tk[i].color, "theme token color")
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
