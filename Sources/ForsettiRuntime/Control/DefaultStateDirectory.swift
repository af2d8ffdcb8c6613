import Glibc

/// Where the state lives when no `--state` is given: a place no other user can create first.
///
/// `./.forsetti` (the default before) let anyone who could write the working directory plant a
/// state directory, or a control socket the CLI would then talk to. The default is now one the
/// caller owns: `$XDG_STATE_HOME/forsetti` when that directory exists and is the caller's own
/// (an environment carried over by `sudo -E` names another user's directory, which is then
/// ignored), else root's `/var/lib/forsetti` (what the systemd unit uses, writable by root
/// alone), else `~/.local/state/forsetti`, as the XDG base directory rules put a user's state.
package enum DefaultStateDirectory {
  /// How `--help` and the manual say it.
  package static let described =
    "$XDG_STATE_HOME/forsetti if that directory is yours, else /var/lib/forsetti as root, else ~/.local/state/forsetti"

  /// The rule: `$XDG_STATE_HOME/forsetti` when that is absolute (the XDG rule ignores a relative
  /// one) and owned by the caller (`xdgStateHomeOwner`, nil when it does not exist), else root's
  /// system directory, else `HOME/.local/state/forsetti`.
  package static func path(
    effectiveUID: UInt32, xdgStateHome: String?, xdgStateHomeOwner: UInt32?, home: String
  ) -> String {
    if let x = xdgStateHome, x.hasPrefix("/"), xdgStateHomeOwner == effectiveUID {
      return join(x, "forsetti")
    }
    if effectiveUID == 0 { return "/var/lib/forsetti" }
    return join(home, ".local/state/forsetti")
  }

  /// This process's default: its effective uid, its environment, and its home as the user
  /// database says when `HOME` is unset or relative.
  package static var current: String {
    let uid = geteuid()
    let xdg = getenv("XDG_STATE_HOME").map { String(cString: $0) }
    var owner: UInt32?
    if let xdg {
      var s = stat()
      // stat follows a symbolic link: what counts is who owns the directory it leads to.
      if stat(xdg, &s) == 0, (s.st_mode & S_IFMT) == S_IFDIR { owner = s.st_uid }
    }
    var home = getenv("HOME").map { String(cString: $0) } ?? ""
    if !home.hasPrefix("/") {
      home = getpwuid(uid).flatMap { $0.pointee.pw_dir.map { String(cString: $0) } } ?? "/nonexistent"
    }
    return path(effectiveUID: uid, xdgStateHome: xdg, xdgStateHomeOwner: owner, home: home)
  }

  private static func join(_ a: String, _ b: String) -> String {
    a.hasSuffix("/") ? a + b : a + "/" + b
  }
}
