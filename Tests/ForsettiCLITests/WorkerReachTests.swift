import ForsettiTestSupport
import Foundation
import Glibc
import Testing

/// Issue 40, eighth finding: as uid 65534, `forsetti-host run` said the worker executable "is
/// missing" when it sat in a directory only root could enter, and people looked for a file that
/// was there. A host copy in a directory everyone may enter, with its `forsetti-worker` a link
/// into a directory of mode 0700: the error names the directory that stops uid 65534 and does
/// not say "missing". Controls: the same host with no worker beside it says "is missing"; with
/// a worker that is not executable, "is not executable by uid 65534".
@Suite(.onTestThreads) struct WorkerReachTests {
  @Test func theErrorTellsMissingFromNotReachableByThisUser() throws {
    try #require(geteuid() == 0, "switching to uid 65534 needs root")
    let dir = TemporaryDirectory("worker-reach")
    let open = dir.url("open")
    let closed = dir.url("closed")
    for d in [open, closed] {
      try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    }
    chmod(dir.path, 0o755)
    chmod(open, 0o755)
    chmod(closed, 0o700)
    let built = (HostBinary.path as NSString).deletingLastPathComponent
    try FileManager.default.copyItem(atPath: built + "/forsetti-host", toPath: open + "/forsetti-host")
    chmod(open + "/forsetti-host", 0o755)
    let state = dir.url("state")
    for d in [state, dir.url("manifests"), dir.url("plugins")] {
      try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
      chmod(d, 0o755)
    }
    chown(state, HostileHost.nobody, HostileHost.nobody)

    func runAsNobody() throws -> ProcessResult {
      try ProcessRunner.run(
        "/usr/bin/setpriv",
        [
          "--reuid=\(HostileHost.nobody)", "--regid=\(HostileHost.nobody)", "--clear-groups", "--",
          open + "/forsetti-host", "run", "--state", state, "--manifests", dir.url("manifests"),
          "--plugins", dir.url("plugins"),
        ], in: dir.path)
    }
    // No worker beside the host: missing.
    let missing = try runAsNobody()
    #expect(missing.status == 2, "\(missing.stderr)")
    #expect(missing.stderr.contains("forsetti-worker is missing"), "\(missing.stderr)")
    // A link into the 0700 directory: not reachable, naming it.
    try FileManager.default.copyItem(atPath: built + "/forsetti-worker", toPath: closed + "/forsetti-worker")
    chmod(closed + "/forsetti-worker", 0o755)
    try FileManager.default.createSymbolicLink(
      atPath: open + "/forsetti-worker", withDestinationPath: closed + "/forsetti-worker")
    let hidden = try runAsNobody()
    #expect(hidden.status == 2, "\(hidden.stderr)")
    #expect(
      hidden.stderr.contains(
        "cannot be reached by uid 65534: the directory \(closed) (mode 700, owner uid 0)"),
      "\(hidden.stderr)")
    #expect(!hidden.stderr.contains("missing"), "\(hidden.stderr)")
    // In reach but not executable.
    chmod(closed, 0o755)
    chmod(closed + "/forsetti-worker", 0o644)
    let notExecutable = try runAsNobody()
    #expect(
      notExecutable.stderr.contains("is not executable by uid 65534 (mode 644"), "\(notExecutable.stderr)")
  }
}
