import ForsettiTestSupport
import Foundation
import Testing

/// A running `forsetti-host run` converges on trust files delivered the way a fleet delivers
/// them, through symbolic links from the state directory: a Kubernetes ConfigMap volume updated
/// by the kubelet's atomic writer, and a directory kept by configuration management (rsync,
/// Ansible). Each update is a change the host must notice; `com.test.keeper`, which no update
/// concerns, must stay started throughout.
@Suite(.onTestThreads, .serialized) struct FleetDeliveryTests: LiveHostSuite {
  let dir = TemporaryDirectory("fleet")

  /// The modules: one that needs approval, one an override turns off, one a licence unlocks;
  /// the vendor key trusted for licences is delivered in `keys` when given.
  private func modules(keys: ConfigMapVolume? = nil) throws {
    let paid = try module("com.test.paid", product: "com.vendor.pro")
    let keeper = try module("com.test.keeper")
    try module("com.test.approved", capabilities: ["storage"])
    try module("com.test.switched")
    try cli(["keygen", dir.url("vendor")])
    if let keys {
      try keys.update(["vendor.pub": try String(contentsOfFile: dir.url("vendor.pub"), encoding: .utf8)])
      try FileManager.default.createDirectory(
        atPath: state + "/trusted-keys", withIntermediateDirectories: true)
      try link("trusted-keys/licences", to: keys.root)
    } else {
      try FileManager.default.createDirectory(
        atPath: state + "/trusted-keys/licences", withIntermediateDirectories: true)
      try FileManager.default.copyItem(
        atPath: dir.url("vendor.pub"), toPath: state + "/trusted-keys/licences/vendor.pub")
    }
    for so in [paid, keeper] { try cli(["sign", so, "--key", dir.url("vendor.key")]) }
  }

  /// The trust files a fleet's source of truth holds, as the command line writes them in a
  /// staging state directory of its own: what the ConfigMap or the managed directory carries.
  private struct Contents {
    var approved = "", revoked = "", off = "", cleared = "", licence = ""
  }

  private func contents() throws -> Contents {
    let staging = dir.url("staging")
    func read(_ name: String) throws -> String {
      try String(contentsOfFile: staging + "/" + name, encoding: .utf8)
    }
    var c = Contents()
    try cli(["approve", "com.test.approved", "--manifests", manifests, "--state", staging])
    c.approved = try read("approvals.json")
    try cli(["revoke", "com.test.approved", "--state", staging])
    c.revoked = try read("approvals.json")
    try cli(["override", "module", "com.test.switched", "off", "--state", staging])
    c.off = try read("overrides.json")
    try cli(["override", "module", "com.test.switched", "clear", "--state", staging])
    c.cleared = try read("overrides.json")
    try cli([
      "licence", "--key", dir.url("vendor.key"), "--product", "com.vendor.pro", "--licensee", "Ada",
      "--expires", TrustTests.instant(3600), "--out", dir.url("pro.licence"),
    ])
    c.licence = try String(contentsOfFile: dir.url("pro.licence"), encoding: .utf8)
    return c
  }

  /// `STATE/NAME` made a symbolic link to `target`, as an operator points the host at a delivery.
  private func link(_ name: String, to target: String) throws {
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(atPath: state + "/" + name, withDestinationPath: target)
  }

  private func expect(
    _ modules: [String: String], _ host: DevHost, sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    let w = published(modules.merging(["com.test.keeper": "started"]) { a, _ in a }, by: host)
    try #require(w.reached, why(w, host), sourceLocation: sourceLocation)
  }

  // MARK: - Kubernetes

  /// `run` as `user`; unprivileged, on a state directory made over to that user as a service's
  /// is, the deliveries staying root's and only readable, as a read-only volume is.
  private func launch(as user: HostileHost.Identity) throws -> DevHost {
    guard user == .unprivileged else { return try launch() }
    chmod(dir.path, 0o755)
    let chown = try ProcessRunner.run(
      "/bin/chown", ["-R", "\(HostileHost.nobody):\(HostileHost.nobody)", state])
    try #require(chown.status == 0, "\(chown.stderr)")
    let args = [
      "run", "--manifests", manifests, "--plugins", dir.url("plugins"), "--state", state, "--for", "300",
    ]
    return try DevHost(
      StateDirectoryIdentityTests.asNobody + [HostBinary.forOtherUsers] + args, verb: nil,
      executable: "/usr/bin/setpriv")
  }

  @Test(arguments: HostileHost.Identity.allCases)
  func configMapsUpdatedByTheKubeletsAtomicWriterAreFollowed(as user: HostileHost.Identity) throws {
    try #require(user == .current || geteuid() == 0, "running as another user needs root")
    let keys = ConfigMapVolume(dir.url("mounts/keys"))
    try modules(keys: keys)
    let vendor = try String(contentsOfFile: dir.url("vendor.pub"), encoding: .utf8)
    let c = try contents()
    let trust = ConfigMapVolume(dir.url("mounts/trust"))
    let licences = ConfigMapVolume(dir.url("mounts/licences"))
    try trust.update(["approvals.json": c.approved, "overrides.json": c.cleared])
    try licences.update([:])
    try link("approvals.json", to: trust.root + "/approvals.json")
    try link("overrides.json", to: trust.root + "/overrides.json")
    try link("licences", to: licences.root)

    let host = try launch(as: user)
    defer { host.stop() }
    try expect(
      [
        "com.test.approved": "started", "com.test.switched": "started",
        "com.test.paid": "blocked/moduleLocked",
      ],
      host)

    try trust.update(["approvals.json": c.revoked, "overrides.json": c.cleared])
    try expect(["com.test.approved": "blocked/approvalPending", "com.test.switched": "started"], host)
    try trust.update(["approvals.json": c.approved, "overrides.json": c.cleared])
    try expect(["com.test.approved": "started", "com.test.switched": "started"], host)

    try trust.update(["approvals.json": c.approved, "overrides.json": c.off])
    try expect(["com.test.approved": "started", "com.test.switched": "blocked/moduleLocked"], host)
    try trust.update(["approvals.json": c.approved, "overrides.json": c.cleared])
    try expect(["com.test.approved": "started", "com.test.switched": "started"], host)

    try licences.update(["pro.licence": c.licence])
    try expect(["com.test.paid": "started"], host)
    // The key the licence is signed by, withdrawn and delivered again.
    try keys.update([:])
    try expect(["com.test.paid": "blocked/moduleLocked"], host)
    try keys.update(["vendor.pub": vendor])
    try expect(["com.test.paid": "started"], host)
    try licences.update([:])
    try expect(["com.test.paid": "blocked/moduleLocked"], host)
    // Every step above was published under this host's pid (`published`): one host converged on
    // each delivery, and still runs.
    #expect(host.process.isRunning)

    // Only the current payload is left, as the kubelet leaves it.
    let left = try FileManager.default.contentsOfDirectory(atPath: trust.root).sorted()
    #expect(left.count == 4 && left.contains("..data") && left.contains("approvals.json"), "\(left)")
  }

  /// The host never writes into a delivery: a command that would replace a delivered state
  /// file refuses and says where to change it; the link and what it leads to stay as they were.
  @Test func aCommandRefusesToReplaceADeliveredStateFile() throws {
    try module("com.test.approved", capabilities: ["storage"])
    let staging = dir.url("staging")
    try cli(["approve", "com.test.approved", "--manifests", manifests, "--state", staging])
    try cli(["revoke", "com.test.approved", "--state", staging])
    let revoked = try String(contentsOfFile: staging + "/approvals.json", encoding: .utf8)
    let trust = ConfigMapVolume(dir.url("mounts/trust"))
    try trust.update(["approvals.json": revoked])
    try link("approvals.json", to: trust.root + "/approvals.json")

    let r = try HostBinary.run(["approve", "com.test.approved", "--manifests", manifests, "--state", state])
    #expect(r.status != 0 && r.stderr.contains("symbolic link"), "\(r.status) \(r.stderr)")
    #expect(
      try FileManager.default.destinationOfSymbolicLink(atPath: state + "/approvals.json") == trust.root
        + "/approvals.json")
    #expect(try String(contentsOfFile: state + "/approvals.json", encoding: .utf8) == revoked)

    // The positive control: the same command succeeds on a plain state directory.
    try cli(["approve", "com.test.approved", "--manifests", manifests, "--state", dir.url("plain")])
  }

  // MARK: - Configuration management

  @Test func aDirectoryKeptByConfigurationManagementIsFollowed() throws {
    try modules()
    let c = try contents()
    let managed = dir.url("etc/forsetti")
    try FileManager.default.createDirectory(atPath: managed + "/licences", withIntermediateDirectories: true)
    try Managed.put(c.approved, at: managed + "/approvals.json")
    try Managed.put(c.cleared, at: managed + "/overrides.json")
    try link("approvals.json", to: managed + "/approvals.json")
    try link("overrides.json", to: managed + "/overrides.json")
    try link("licences", to: managed + "/licences")

    let host = try launch()
    defer { host.stop() }
    try expect(
      [
        "com.test.approved": "started", "com.test.switched": "started",
        "com.test.paid": "blocked/moduleLocked",
      ],
      host)

    // rsync and Ansible's copy: a temporary file beside the target, renamed over it.
    try Managed.put(c.revoked, at: managed + "/approvals.json")
    try expect(["com.test.approved": "blocked/approvalPending"], host)
    try Managed.put(c.approved, at: managed + "/approvals.json")
    try expect(["com.test.approved": "started"], host)
    try Managed.put(c.off, at: managed + "/overrides.json")
    try expect(["com.test.switched": "blocked/moduleLocked"], host)
    try Managed.put(c.cleared, at: managed + "/overrides.json")
    try expect(["com.test.switched": "started"], host)

    // A licence file put into the managed directory the same way.
    try Managed.put(c.licence, at: managed + "/licences/pro.licence")
    try expect(["com.test.paid": "started"], host)

    // The directory replaced whole. rename(2) cannot move a directory over a non-empty one
    // (ENOTEMPTY), so a tool moves the old one aside first, then the new one in, then removes
    // the old: the new directory, a new inode, must be watched in its turn.
    try FileManager.default.createDirectory(
      atPath: managed + "/licences.new", withIntermediateDirectories: true)
    #expect(rename(managed + "/licences", managed + "/licences.old") == 0)
    #expect(rename(managed + "/licences.new", managed + "/licences") == 0)
    try FileManager.default.removeItem(atPath: managed + "/licences.old")
    try expect(["com.test.paid": "blocked/moduleLocked"], host)
    try Managed.put(c.licence, at: managed + "/licences/pro.licence")
    try expect(["com.test.paid": "started"], host)

    // Or atomically, as a deployment tool switches releases: the directory is a link, and a
    // new link is renamed over it (`ln -s releases/2 licences.tmp && mv -T licences.tmp licences`).
    let releases = dir.url("etc/releases")
    try FileManager.default.createDirectory(atPath: releases + "/1", withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: releases + "/2", withIntermediateDirectories: true)
    try Managed.put(c.licence, at: releases + "/1/pro.licence")
    try FileManager.default.removeItem(atPath: managed + "/licences")
    try Managed.relink(managed + "/licences", to: releases + "/1")
    try expect(["com.test.paid": "started"], host)
    try Managed.relink(managed + "/licences", to: releases + "/2")
    try expect(["com.test.paid": "blocked/moduleLocked"], host)
    try Managed.relink(managed + "/licences", to: releases + "/1")
    try expect(["com.test.paid": "started"], host)
  }
}

/// A ConfigMap volume as the kubelet's AtomicWriter (kubernetes `pkg/volume/util/atomic_writer.go`)
/// lays it out and updates it: the payload in a timestamped directory `..2026_12_06_16_00_00.N`,
/// `..data` a link to it, and each visible `NAME` a link to `..data/NAME`.
private struct ConfigMapVolume {
  let root: String

  init(_ root: String) { self.root = root }

  /// One update, in the writer's order: the new timestamped directory is written, a link
  /// `..data_tmp` to it is made and renamed over `..data`, the visible links of new names are
  /// made and those of names gone removed, then the old timestamped directory is removed.
  func update(_ payload: [String: String]) throws {
    let fm = FileManager.default
    try fm.createDirectory(atPath: root, withIntermediateDirectories: true)
    let old = try? fm.destinationOfSymbolicLink(atPath: root + "/..data")
    let visible = Set((try fm.contentsOfDirectory(atPath: root)).filter { !$0.hasPrefix("..") })
    let stamp = "..2026_12_06_16_00_00." + String(UInt32.random(in: 0...UInt32.max))
    try fm.createDirectory(atPath: root + "/" + stamp, withIntermediateDirectories: false)
    for (name, text) in payload {
      try Data(text.utf8).write(to: URL(fileURLWithPath: root + "/" + stamp + "/" + name))
    }
    try fm.createSymbolicLink(atPath: root + "/..data_tmp", withDestinationPath: stamp)
    guard rename(root + "/..data_tmp", root + "/..data") == 0 else { throw CocoaError(.fileWriteUnknown) }
    for name in payload.keys where !visible.contains(name) {
      try fm.createSymbolicLink(atPath: root + "/" + name, withDestinationPath: "..data/" + name)
    }
    for name in visible where payload[name] == nil {
      try fm.removeItem(atPath: root + "/" + name)
    }
    if let old { try fm.removeItem(atPath: root + "/" + old) }
  }
}

/// How configuration management writes: rsync and Ansible's `copy` write a temporary file in
/// the target's directory (rsync's `.NAME.XXXXXX`) and rename it over the target.
private enum Managed {
  static func put(_ text: String, at path: String) throws {
    let dir = (path as NSString).deletingLastPathComponent
    let tmp =
      dir + "/." + (path as NSString).lastPathComponent + "." + String(UInt32.random(in: 0...UInt32.max))
    try Data(text.utf8).write(to: URL(fileURLWithPath: tmp))
    guard rename(tmp, path) == 0 else { throw CocoaError(.fileWriteUnknown) }
  }

  /// `ln -s TARGET PATH.tmp && mv -T PATH.tmp PATH`: the link replaced in one rename.
  static func relink(_ path: String, to target: String) throws {
    try FileManager.default.createSymbolicLink(atPath: path + ".tmp", withDestinationPath: target)
    guard rename(path + ".tmp", path) == 0 else { throw CocoaError(.fileWriteUnknown) }
  }
}
