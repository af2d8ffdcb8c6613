import ForsettiCore

/// Every module the host knows, keyed by module ID, in the order their files were judged (a
/// file that declares no ID has a slot too, for the report, but no key).
struct ModuleTable {
  private(set) var slots: [ModuleSlot] = []
  private var byID: [String: Int] = [:]

  /// The slot of `id`.
  func index(of id: String) -> Int? { byID[id] }

  subscript(i: Int) -> ModuleSlot {
    get { slots[i] }
    set { slots[i] = newValue }
  }

  var indices: Range<Int> { slots.indices }

  /// Adds a slot; a second slot for one ID replaces nothing (the first keeps the key).
  @discardableResult
  mutating func append(_ slot: ModuleSlot) -> Int {
    slots.append(slot)
    let i = slots.count - 1
    if let id = slot.moduleID, byID[id] == nil { byID[id] = i }
    return i
  }

  /// Forgets every slot (a fresh `activate`).
  mutating func removeAll() {
    slots.removeAll()
    byID.removeAll()
  }

  var records: [ModuleRecord] { slots.map(\.record) }

  /// Slots with a started instance, in start order.
  var running: [Int] {
    slots.indices.filter { slots[$0].isRunning }.sorted { slots[$0].startSequence < slots[$1].startSequence }
  }
}
