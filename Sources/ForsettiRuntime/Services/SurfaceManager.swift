import ForsettiBridge
import ForsettiCore

/// The host's published UI state, composed from every started module's accepted contributions.
///
/// Composition follows Forsetti: modules in ID order; toolbar items concatenated; view
/// injections sorted by slot, then priority high to low; overlay routes and pointers
/// de-duplicated and sorted; the last theme mask wins and is stripped before publication,
/// because host shell styling stays the host's.
public struct Surface: Sendable, Hashable {
  public struct Item: Sendable, Hashable {
    public var moduleID: String
    public var item: ToolbarItem
  }

  public struct View: Sendable, Hashable {
    public var moduleID: String
    public var view: ViewInjection
  }

  public var modules: [String] = []
  public var toolbarItems: [Item] = []
  public var viewInjections: [View] = []
  public var routes: [String] = []
  public var pointers: [String] = []
  /// The theme that would have applied, recorded so that `surface` can say it was stripped.
  public var strippedThemeID: String?

  package static func compose(_ contributions: [String: UIContributions]) -> Surface {
    var s = Surface()
    var routes = Set<String>()
    var pointers = Set<String>()
    for id in contributions.keys.sorted() {
      guard let c = contributions[id] else { continue }
      s.modules.append(id)
      s.toolbarItems += c.toolbarItems.map { Item(moduleID: id, item: $0) }
      s.viewInjections += c.viewInjections.map { View(moduleID: id, view: $0) }
      routes.formUnion(c.overlay?.routes ?? [])
      pointers.formUnion(c.overlay?.pointers ?? [])
      if let t = c.themeMask { s.strippedThemeID = t.themeID }
    }
    s.viewInjections.sort {
      $0.view.slotID != $1.view.slotID ? $0.view.slotID < $1.view.slotID : $0.view.priority > $1.view.priority
    }
    s.routes = routes.sorted()
    s.pointers = pointers.sorted()
    return s
  }

  /// The JSON form printed by `forsetti-host surface --json`.
  package var json: JSONValue {
    .object(
      JSONObject([
        ("modules", .strings(modules)),
        (
          "toolbarItems",
          .array(
            toolbarItems.map {
              .object(
                JSONObject([
                  ("moduleID", .string($0.moduleID)), ("itemID", .string($0.item.itemID)),
                  ("title", .string($0.item.title)),
                  ("actionRouteID", .string(orNull: $0.item.actionRouteID)),
                ]))
            })
        ),
        (
          "viewInjections",
          .array(
            viewInjections.map {
              .object(
                JSONObject([
                  ("moduleID", .string($0.moduleID)), ("viewID", .string($0.view.viewID)),
                  ("slotID", .string($0.view.slotID)), ("priority", .number(String($0.view.priority))),
                ]))
            })
        ),
        ("overlay", .object(JSONObject([("routes", .strings(routes)), ("pointers", .strings(pointers))]))),
        ("themeMask", .null),
        ("strippedThemeID", .string(orNull: strippedThemeID)),
      ]))
  }
}
