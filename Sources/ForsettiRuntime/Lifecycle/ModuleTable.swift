import ForsettiCore

/// A slot's place in the table. Only the table makes one (`handle(of:)`, `handles`, `append`),
/// so a slot is reached by module ID or by a handle the table gave, never by a number
/// computed elsewhere. Ordered as the slots were added (the order their files were judged).
struct SlotHandle: Hashable, Comparable {
  fileprivate let position: Int

  static func < (a: SlotHandle, b: SlotHandle) -> Bool { a.position < b.position }
}

/// Every module the host knows, keyed by module ID, in the order their files were judged (a
/// file that declares no ID has a slot too, for the report, but no key). A slot changes only
/// through its own methods, reached through `self[handle]`. One table is shared by the
/// lifecycle's parts (starting, stopping, supervision, reload, reconciling), hence a class.
///
/// Used from the host's main thread only, like every part that is given it.
final class ModuleTable {
  private(set) var slots: [ModuleSlot] = []
  private var byID: [String: SlotHandle] = [:]
  /// Counts starts, so modules stop in the reverse order of their starts.
  private var starts = 0

  /// The slot of `id`.
  func handle(of id: String) -> SlotHandle? { byID[id] }

  subscript(h: SlotHandle) -> ModuleSlot {
    get { slots[h.position] }
    _modify { yield &slots[h.position] }
  }

  /// Every slot, in the order they were added.
  var handles: [SlotHandle] { slots.indices.map(SlotHandle.init(position:)) }

  /// Adds a slot; a second slot for one ID replaces nothing (the first keeps the key).
  @discardableResult
  func append(_ slot: ModuleSlot) -> SlotHandle {
    slots.append(slot)
    let h = SlotHandle(position: slots.count - 1)
    if let id = slot.moduleID, byID[id] == nil { byID[id] = h }
    return h
  }

  /// Forgets every slot (a fresh `activate`); starts are still counted on from where they were.
  func removeAll() {
    slots.removeAll()
    byID.removeAll()
  }

  /// The sequence number of the start being recorded now (`ModuleSlot.started`).
  func nextStart() -> Int {
    starts += 1
    return starts
  }

  var records: [ModuleRecord] { slots.map(\.record) }

  /// Slots with a started instance, in start order.
  var running: [SlotHandle] {
    handles.filter { self[$0].isRunning }.sorted { self[$0].startSequence < self[$1].startSequence }
  }

  /// The composed UI surface of the started modules.
  var surface: Surface {
    Surface.compose(
      Dictionary(
        slots.compactMap { s in s.ui.flatMap { ui in s.moduleID.map { ($0, ui) } } }
      ) { a, _ in a })
  }

  /// When the next restart is due, if any.
  var nextRestart: ContinuousClock.Instant? { slots.compactMap { $0.restart?.due }.min() }
}
