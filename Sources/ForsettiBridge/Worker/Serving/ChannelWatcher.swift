import CForsettiSys
import Glibc

/// The provider's watch over its consumers' channels: one thread for up to `capacity` channels,
/// asleep on all their bells at once (futex_waitv) and on a word of its own rung when a channel
/// is sent. One thread per channel, as before, cost a stack and a malloc arena per consumer
/// (some 45 MB of address space each): a provider under its address-space limit stopped serving
/// past some 15 consumers, and a consumer that had its channel remade again and again piled up
/// threads. A consumer has one channel here: one sent again under the same label (the consumer
/// the host names) replaces the one before, which is closed.
///
/// The worker's thread that reads the socket `send`s channels; the watching thread alone owns a
/// `Watch`, which keeps what it has seen on each lane.
final class ChannelWatcher: Sendable {
  /// The channels one thread watches: futex_waitv's words, less the watcher's own.
  static let capacity = Int(FORSETTI_FUTEX_WAITV_MAX) - 1

  private let inbox = SleepingLock<[(ChannelRing, String)]>([])
  // Rung (bumped, then woken) when a channel is sent. Shared safely: read and written only
  // through the C atomics and the futex calls; allocated for the watcher's life.
  nonisolated(unsafe) private let control: UnsafeMutablePointer<UInt32>

  init() {
    control = .allocate(capacity: 1)
    control.initialize(to: 0)
  }

  deinit { control.deallocate() }

  /// Hands `channel`, labelled with its consumer, to the watching thread.
  func send(_ channel: ChannelRing, label: String) {
    inbox.withLock { $0.append((channel, label)) }
    _ = forsetti_fetch_add(control, 1)
    _ = forsetti_futex_wake(control, 1)
  }

  /// A request found on a lane, or a call its caller withdrew before a handler began it.
  struct Found {
    let channel: ChannelRing
    let lane: CallRing
    let seq: UInt32
    let label: String
  }

  /// What one look found.
  struct Batch {
    var calls: [Found] = []
    var withdrawn: [Found] = []
    /// One channel is watched: its calls may run on the watching thread itself, which then
    /// keeps no other consumer's call from being seen meanwhile.
    var alone = false
  }

  /// The watching thread's side.
  struct Watch {
    private struct Entry {
      let ring: ChannelRing
      let label: String
      var seen: [UInt32]
      /// The bell's count when the lanes were last looked at.
      var bell: UInt32 = 0
    }

    private let watcher: ChannelWatcher
    private var entries: [Entry] = []
    private let spin = SpinBudget(ceiling: CallRing.spinNanoseconds)
    private var words: [UnsafeMutablePointer<UInt32>?] = []
    private var expected: [UInt32] = []

    init(_ watcher: ChannelWatcher) { self.watcher = watcher }

    /// Blocks until a look finds a call or a withdrawn one, and puts them in `batch`.
    mutating func next(into batch: inout Batch) {
      while true {
        let rung = forsetti_load_seq_cst(watcher.control)
        take()
        look(into: &batch)
        if !batch.calls.isEmpty || !batch.withdrawn.isEmpty { return }
        sleep(rung: rung)
      }
    }

    /// Takes the channels sent: one with a label watched already replaces it (and closes the
    /// old one, so the consumer's calls still on it end). Drops those closed.
    private mutating func take() {
      let sent = watcher.inbox.withLock { s -> [(ChannelRing, String)] in
        defer { s.removeAll() }
        return s
      }
      for (ring, label) in sent {
        let entry = Entry(ring: ring, label: label, seen: Array(repeating: 0, count: ring.lanes.count))
        if let i = entries.firstIndex(where: { $0.label == label }) {
          if entries[i].ring !== ring { entries[i].ring.close() }
          entries[i] = entry
        } else {
          entries.append(entry)
        }
      }
      entries.removeAll { $0.ring.isClosed }
    }

    private mutating func look(into batch: inout Batch) {
      batch.alone = entries.count == 1
      for e in entries.indices {
        let ring = entries[e].ring
        entries[e].bell = ring.bell
        for (i, lane) in ring.lanes.enumerated() {
          let seq = lane.requestSequence
          let found = Found(channel: ring, lane: lane, seq: seq, label: entries[e].label)
          // Withdrawn by its caller: answered now, so the lane is free for its next call.
          if seq == entries[e].seen[i], lane.retire(seq, now: 0) { batch.withdrawn.append(found) }
          guard seq != entries[e].seen[i] else { continue }
          entries[e].seen[i] = seq
          batch.calls.append(found)
        }
      }
    }

    private func moved(rung: UInt32) -> Bool {
      forsetti_load_acquire(watcher.control) != rung || entries.contains { $0.ring.bell != $0.bell }
    }

    /// Spins as long as `spin` says, then sleeps until a bell or the watcher's own word moves
    /// (a second at most).
    private mutating func sleep(rung: UInt32) {
      let budget = spin.next
      let start = CallRing.nanoseconds()
      var n = 0
      while budget > 0 {
        if moved(rung: rung) {
          spin.record(answeredWhileSpinning: true)
          return
        }
        n += 1
        guard n & 15 == 0 else {
          forsetti_cpu_relax()
          continue
        }
        if CallRing.nanoseconds() &- start > budget { break }
        sched_yield()
      }
      spin.record(answeredWhileSpinning: false)
      for e in entries { e.ring.providerAsleep(true) }
      defer { for e in entries { e.ring.providerAsleep(false) } }
      // Raise the flags, then look again: a consumer bumps the bell, then reads the flag.
      guard !moved(rung: rung) else { return }
      words.removeAll(keepingCapacity: true)
      expected.removeAll(keepingCapacity: true)
      for e in entries {
        words.append(e.ring.bellWord)
        expected.append(e.bell)
      }
      words.append(watcher.control)
      expected.append(rung)
      let woke = words.withUnsafeBufferPointer { w in
        expected.withUnsafeBufferPointer { x in
          forsetti_futex_waitv(w.baseAddress, x.baseAddress, Int32(w.count), Int64(CallRing.recheck))
        }
      }
      // A kernel before 5.16 has no futex_waitv: the bells are then looked at every millisecond.
      if woke < 0, errno == ENOSYS { _ = forsetti_futex_wait(watcher.control, rung, 1_000_000) }
    }
  }
}
