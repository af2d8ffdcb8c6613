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
/// through its own methods, reached through `self[handle]`.
struct ModuleTable {
  private(set) var slots: [ModuleSlot] = []
  private var byID: [String: SlotHandle] = [:]

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
  mutating func append(_ slot: ModuleSlot) -> SlotHandle {
    slots.append(slot)
    let h = SlotHandle(position: slots.count - 1)
    if let id = slot.moduleID, byID[id] == nil { byID[id] = h }
    return h
  }

  /// Forgets every slot (a fresh `activate`).
  mutating func removeAll() {
    slots.removeAll()
    byID.removeAll()
  }

  var records: [ModuleRecord] { slots.map(\.record) }

  /// Slots with a started instance, in start order.
  var running: [SlotHandle] {
    handles.filter { self[$0].isRunning }.sorted { self[$0].startSequence < self[$1].startSequence }
  }
}
