import ForsettiRuntime
import Foundation
import Glibc
import Testing

/// Where state lives without `--state`: never a directory another user could create first (the
/// working directory was one), so it is the caller's own XDG state directory, root's system one,
/// or under the caller's home.
@Suite struct DefaultStateDirectoryTests {
  @Test func rootGetsTheSystemDirectoryUnlessItsOwnXDGStateHomeSaysOtherwise() {
    #expect(
      DefaultStateDirectory.path(effectiveUID: 0, xdgStateHome: nil, xdgStateHomeOwner: nil, home: "/root")
        == "/var/lib/forsetti")
    // `sudo -E` carrying a user's XDG_STATE_HOME: that user's directory is not root's.
    #expect(
      DefaultStateDirectory.path(
        effectiveUID: 0, xdgStateHome: "/home/ann/.state", xdgStateHomeOwner: 1000, home: "/root")
        == "/var/lib/forsetti")
    #expect(
      DefaultStateDirectory.path(
        effectiveUID: 0, xdgStateHome: "/srv/root-state", xdgStateHomeOwner: 0, home: "/root")
        == "/srv/root-state/forsetti")
  }

  @Test func anotherUserGetsTheirOwnAbsoluteXDGStateHome() {
    #expect(
      DefaultStateDirectory.path(
        effectiveUID: 1000, xdgStateHome: "/home/ann/.state", xdgStateHomeOwner: 1000, home: "/home/ann")
        == "/home/ann/.state/forsetti")
    #expect(
      DefaultStateDirectory.path(
        effectiveUID: 1000, xdgStateHome: "/srv/state/", xdgStateHomeOwner: 1000, home: "/home/ann")
        == "/srv/state/forsetti")
    // Someone else's directory, or one that does not exist: home's instead.
    for owner in [UInt32(0), 1001] as [UInt32?] + [nil] {
      #expect(
        DefaultStateDirectory.path(
          effectiveUID: 1000, xdgStateHome: "/tmp/x", xdgStateHomeOwner: owner, home: "/home/ann")
          == "/home/ann/.local/state/forsetti", "owner \(String(describing: owner))")
    }
  }

  /// The XDG rule ignores a relative (or empty) value: it would be the working directory again.
  @Test func aRelativeOrEmptyXDGStateHomeIsIgnored() {
    for xdg in ["state", ".", "./x", ""] {
      #expect(
        DefaultStateDirectory.path(
          effectiveUID: 1000, xdgStateHome: xdg, xdgStateHomeOwner: 1000, home: "/home/ann")
          == "/home/ann/.local/state/forsetti", "XDG_STATE_HOME=\(xdg)")
    }
  }

  @Test func withoutXDGStateHomeItIsUnderHome() {
    #expect(
      DefaultStateDirectory.path(
        effectiveUID: 65534, xdgStateHome: nil, xdgStateHomeOwner: nil, home: "/nonexistent")
        == "/nonexistent/.local/state/forsetti")
    #expect(
      DefaultStateDirectory.path(
        effectiveUID: 1000, xdgStateHome: nil, xdgStateHomeOwner: nil, home: "/home/ann/")
        == "/home/ann/.local/state/forsetti")
  }

  /// The real binary, as root: its own XDG directory is used, another user's is not.
  @Test func theCommandLineFollowsTheRule() throws {
    guard geteuid() == 0 else { return }
    let base = NSTemporaryDirectory() + "default-state-\(getpid())-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: base) }
    let binary = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent().appendingPathComponent(".build/debug/forsetti-host").path
    func status(xdg: String) throws -> String {
      let p = Process()
      p.executableURL = URL(fileURLWithPath: binary)
      p.arguments = ["status"]
      p.environment = ["XDG_STATE_HOME": xdg, "PATH": "/usr/bin:/bin"]
      let out = Pipe()
      p.standardOutput = out
      p.standardError = out
      try p.run()
      let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
      p.waitUntilExit()
      return text
    }
    #expect(try status(xdg: base).contains(base + "/forsetti"))
    chown(base, 65534, 65534)
    let other = try status(xdg: base)
    #expect(!other.contains(base) && other.contains("/var/lib/forsetti"), "\(other)")
  }
}
