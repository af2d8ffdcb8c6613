import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Synchronization
import Testing

/// A state directory held by identity: what the hold writes lands in the directory it opened,
/// whatever is at the path later, and it notices the path no longer naming it — by an inotify
/// event (waited for, not slept on) and by looking.
@Suite(.onTestThreads) struct StateDirectoryHoldTests {
  let dir = TemporaryDirectory("hold")

  func make(_ name: String) throws -> String {
    let path = dir.url(name)
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
  }

  /// Waits (up to a safety net) for the hold's handler to have said something.
  func noticed(_ seen: Seen) -> StateDirectoryHold.Replacement? {
    let end = Date().addingTimeInterval(60)
    while Date() < end {
      if let r = seen.value.withLock({ $0 }) { return r }
      usleep(5_000)
    }
    return nil
  }

  /// What the hold's handler said, from its thread.
  final class Seen: Sendable {
    let value = Mutex<StateDirectoryHold.Replacement?>(nil)
  }

  @Test func aDirectoryMovedAwayIsNoticedByItsEventAndKeepsItsWrites() throws {
    let s = try make("S")
    let hold = try StateDirectoryHold(path: s)
    defer { hold.stop() }
    let seen = Seen()
    hold.whenReplaced { r in seen.value.withLock { $0 = r } }
    #expect(hold.check() == nil)

    try FileManager.default.moveItem(atPath: s, toPath: s + ".old")
    try FileManager.default.createDirectory(atPath: s, withIntermediateDirectories: false)
    // Nothing was at S when the event came, or already the new S, by when the thread looked.
    let r = try #require(noticed(seen))
    #expect(r == .gone || r == .replaced)
    #expect(hold.check() == r)
    #expect(hold.currentLocation == s + ".old")
    #expect(hold.describe(r).contains("(the directory this host holds is now \(s).old)"))

    // What goes through the hold lands in the moved directory, never in the new S.
    try Data("x".utf8).write(to: URL(fileURLWithPath: hold.within("runtime.json")))
    #expect(FileManager.default.fileExists(atPath: s + ".old/runtime.json"))
    #expect(!FileManager.default.fileExists(atPath: s + "/runtime.json"))
  }

  @Test func aDirectoryRenamedOverThePathIsAReplacement() throws {
    let s = try make("S")
    let other = try make("other")
    let hold = try StateDirectoryHold(path: s)
    defer { hold.stop() }
    let seen = Seen()
    hold.whenReplaced { r in seen.value.withLock { $0 = r } }
    // rename(2) over S: S's own inode is not moved (it is removed), so the parent's event says it.
    try FileManager.default.removeItem(atPath: s)
    #expect(rename(other, s) == 0)
    let r = noticed(seen)
    #expect(r == .gone || r == .replaced)
    #expect(hold.check() != nil)
  }

  /// A grandparent renamed moves the path away from the directory too: its own event says so.
  @Test func anAncestorMovedIsNoticedByItsEvent() throws {
    let s = try make("a/b/S")
    let hold = try StateDirectoryHold(path: s)
    defer { hold.stop() }
    let seen = Seen()
    hold.whenReplaced { r in seen.value.withLock { $0 = r } }
    #expect(rename(dir.url("a"), dir.url("z")) == 0)
    #expect(noticed(seen) == .gone)
    #expect(hold.currentLocation == dir.url("z/b/S"))
  }

  /// The positive control: entries of the parent change, and the directory's own, but it stays.
  @Test func aDirectoryThatStaysIsNotNoticed() throws {
    let s = try make("S")
    let hold = try StateDirectoryHold(path: s)
    defer { hold.stop() }
    let seen = Seen()
    hold.whenReplaced { r in seen.value.withLock { $0 = r } }
    let sibling = try make("sibling")
    try FileManager.default.moveItem(atPath: sibling, toPath: sibling + ".old")
    _ = try make("sibling")
    try Data("x".utf8).write(to: URL(fileURLWithPath: s + "/file"))
    try FileManager.default.moveItem(atPath: s + "/file", toPath: s + "/file2")
    // Then a move that is noticed: the events before it were read first, and said nothing.
    try FileManager.default.moveItem(atPath: s, toPath: s + ".old")
    #expect(noticed(seen) == .gone)
  }

  /// The control's other half: before the move, nothing was noticed, by event or by looking.
  @Test func nothingIsNoticedWhileThePathNamesTheDirectory() throws {
    let s = try make("S")
    let hold = try StateDirectoryHold(path: s)
    defer { hold.stop() }
    _ = try make("sibling")
    try Data("x".utf8).write(to: URL(fileURLWithPath: hold.within("runtime.json")))
    #expect(FileManager.default.fileExists(atPath: s + "/runtime.json"))
    #expect(hold.check() == nil)
    #expect(hold.replacement == nil)
  }

  @Test func theLockIsTakenInTheHeldDirectory() throws {
    let s = try make("S")
    let hold = try StateDirectoryHold(path: s)
    defer { hold.stop() }
    try FileManager.default.moveItem(atPath: s, toPath: s + ".old")
    _ = try make("S")
    let lock = try HostLock(in: hold)
    defer { withExtendedLifetime(lock) {} }
    #expect(FileManager.default.fileExists(atPath: s + ".old/host.lock"))
    #expect(!FileManager.default.fileExists(atPath: s + "/host.lock"))
    // A host on the new S is not refused by this lock; one on the held directory is.
    _ = try HostLock(stateDirectory: s)
    #expect(throws: HostLock.LockError.self) { try HostLock(stateDirectory: s + ".old") }
  }
}
