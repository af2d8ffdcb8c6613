import ForsettiRuntime
import Glibc
import Testing

/// Where state lives without `--state`: never a directory another user could create first (the
/// working directory was one), so root's is the system's and anyone else's is under their home.
@Suite struct DefaultStateDirectoryTests {
  @Test func rootGetsTheSystemDirectoryWhateverItsEnvironmentSays() {
    #expect(
      DefaultStateDirectory.path(effectiveUID: 0, xdgStateHome: nil, home: "/root") == "/var/lib/forsetti")
    #expect(
      DefaultStateDirectory.path(effectiveUID: 0, xdgStateHome: "/tmp/planted", home: "/tmp")
        == "/var/lib/forsetti")
  }

  @Test func anotherUserGetsAnAbsoluteXDGStateHome() {
    #expect(
      DefaultStateDirectory.path(effectiveUID: 1000, xdgStateHome: "/home/ann/.state", home: "/home/ann")
        == "/home/ann/.state/forsetti")
    #expect(
      DefaultStateDirectory.path(effectiveUID: 1000, xdgStateHome: "/srv/state/", home: "/home/ann")
        == "/srv/state/forsetti")
  }

  /// The XDG rule ignores a relative (or empty) value: it would be the working directory again.
  @Test func aRelativeOrEmptyXDGStateHomeIsIgnored() {
    for xdg in ["state", ".", "./x", ""] {
      #expect(
        DefaultStateDirectory.path(effectiveUID: 1000, xdgStateHome: xdg, home: "/home/ann")
          == "/home/ann/.local/state/forsetti", "XDG_STATE_HOME=\(xdg)")
    }
  }

  @Test func withoutXDGStateHomeItIsUnderHome() {
    #expect(
      DefaultStateDirectory.path(effectiveUID: 65534, xdgStateHome: nil, home: "/nonexistent")
        == "/nonexistent/.local/state/forsetti")
    #expect(
      DefaultStateDirectory.path(effectiveUID: 1000, xdgStateHome: nil, home: "/home/ann/")
        == "/home/ann/.local/state/forsetti")
  }

  /// This process (root in CI) gets root's.
  @Test func thisProcessFollowsTheRule() {
    let expected = geteuid() == 0 ? "/var/lib/forsetti" : nil
    if let expected { #expect(DefaultStateDirectory.current == expected) }
  }
}
