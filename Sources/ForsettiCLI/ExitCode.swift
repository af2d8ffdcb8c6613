/// What `forsetti-host` exit statuses mean; scripts may rely on them.
public enum ExitCode: Int32, Sendable {
  /// Everything judged passed (or the command succeeded).
  case success = 0
  /// At least one module is blocked or failed.
  case blocked = 1
  /// The command line or a file it names is wrong; nothing was judged.
  case usage = 2
  /// `status`: no host is running on the state directory (as `systemctl is-active`).
  case notRunning = 3
  /// A host runs on the state directory but gave no answer: it stopped or died mid-request
  /// (which may or may not have been applied), stayed busy past the retries, or took too long.
  case noAnswer = 4
  /// `STATE/control.sock` is not the host's: another user, or not the pid `host.lock` names.
  /// Nothing was sent to it and nothing it said is shown.
  case untrustedSocket = 5
  /// `run`/`dev`: the state directory was moved away or replaced under the host, which stopped,
  /// or an image an upgrade started could not take the host over (sysexits' EX_TEMPFAIL: a
  /// restart, on the directory now at the path, is what is wanted).
  case stateDirectoryReplaced = 75

  static let helpText = """
    EXIT STATUS:
      0  every module passed (or the command succeeded)
      1  at least one module is blocked
      2  usage error: a bad option or value, or an unreadable input file
    """
}
