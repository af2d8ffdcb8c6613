import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiCLI

/// `forsetti-host pack` as a vendor runs it: a real module built with cc (or swift build), the
/// real executable, and the package looked at as a customer's tools would (dpkg-deb, lintian).
/// Nothing is installed here: scripts/package-check installs and removes packages.
@Suite(.onTestThreads) struct PackCommandTests {
  let dir = TemporaryDirectory("pack")
  static let maintainer = "Test Vendor <vendor@example.org>"

  /// A C module that calls libc, so its package depends on libc6.
  static let source = """
    #include <stdint.h>
    #include <stdio.h>
    #include <string.h>
    static char text[64];
    __attribute__((visibility("default"))) const void *ENTRY(uint32_t abi) {
      snprintf(text, sizeof text, "abi %u", abi);
      return strlen(text) > 1000 ? text : NULL;
    }
    """

  /// A C project as `forsetti-host new --lang c` lays it out: manifests/NAME.json and, built,
  /// build/libNAME.so. Returns the project directory.
  @discardableResult
  func cProject(
    _ id: String, in name: String, source: String = PackCommandTests.source, flags: [String] = [],
    displayName: String? = nil
  ) throws -> String {
    let t = ModuleTemplate(language: .c, moduleID: id, type: .service, prefix: "")
    var manifest = t.manifest
    if let displayName {
      manifest = manifest.replacingOccurrences(
        of: "\"displayName\": \"\(t.typeName)\"", with: "\"displayName\": \"\(displayName)\"")
    }
    try dir.write("\(name)/\(t.manifestPath)", manifest)
    let src = try dir.write(
      "\(name)/src/\(t.cName).c", source.replacingOccurrences(of: "ENTRY", with: t.entryPoint))
    try FileManager.default.createDirectory(
      atPath: dir.url("\(name)/build"), withIntermediateDirectories: true)
    let cc = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "cc", "-O2", "-g", "-fPIC", "-fvisibility=hidden", "-shared", "-o",
        dir.url("\(name)/\(t.binaryPath)"), src,
      ]
        + flags)
    try #require(cc.status == 0, "cc: \(cc.stderr)")
    return dir.url(name)
  }

  func pack(_ args: [String], in directory: String? = nil) throws -> ProcessResult {
    try HostBinary.run(["pack"] + args, in: directory)
  }

  func dpkgDeb(_ args: [String]) throws -> String {
    let r = try ProcessRunner.run("/usr/bin/dpkg-deb", args)
    #expect(r.status == 0, "dpkg-deb \(args): \(r.stderr)")
    return r.stdout
  }

  /// lintian's E: and W: lines for `deb` (overridden tags are not among them).
  func lintianComplaints(_ deb: String) throws -> [String] {
    let lintian = "/usr/bin/lintian"
    try #require(
      FileManager.default.isExecutableFile(atPath: lintian),
      "lintian is not installed: scripts/bootstrap --tests installs it")
    let r = try ProcessRunner.run(lintian, ["--tag-display-limit", "0", deb])
    return (r.stdout + r.stderr).split(separator: "\n").map(String.init).filter {
      $0.hasPrefix("E: ") || $0.hasPrefix("W: ")
    }
  }

  /// `dpkg-deb -c`: path (without the leading ".") → mode string (`-rw-r--r--`).
  func contents(_ deb: String) throws -> [String: String] {
    var out: [String: String] = [:]
    for line in try dpkgDeb(["-c", deb]).split(separator: "\n") {
      let parts = line.split(separator: " ", omittingEmptySubsequences: true)
      guard let mode = parts.first, let path = parts.last else { continue }
      out[String(path.dropFirst())] = String(mode)
    }
    return out
  }

  @Test func aCModuleBecomesALintianCleanPackageAtTheSystemPaths() throws {
    let project = try cProject("com.Test.Packed-C", in: "cmod", displayName: "Packed C")
    let so = project + "/build/libPacked_C.so"
    let original = try Data(contentsOf: URL(fileURLWithPath: so))
    // Signed by a vendor key shipped beside it.
    #expect(try HostBinary.run(["keygen", dir.url("vendor")]).status == 0)
    #expect(try HostBinary.run(["sign", so, "--key", dir.url("vendor.key")]).status == 0)
    try FileManager.default.createDirectory(atPath: dir.url("out"), withIntermediateDirectories: true)

    let r = try pack(
      [
        "--out", dir.url("out"), "--maintainer", Self.maintainer, "--public-key", dir.url("vendor.pub"),
        "--json",
      ],
      in: project)
    try #require(r.status == 0, "pack: \(r.stdout)\(r.stderr)")
    let json = try #require(
      try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stdout)")
    let deb = dir.url("out/com.test.packed-c_0.1.0-1_amd64.deb")
    #expect(json["deb"] as? String == deb)
    #expect(json["package"] as? String == "com.test.packed-c")
    #expect(json["version"] as? String == "0.1.0-1")
    #expect(json["arch"] as? String == "amd64")
    #expect((json["signature"] as? String)?.contains("verified") == true, "\(r.stdout)")
    let depends = try #require(json["depends"] as? [String])
    #expect(depends.contains { $0.hasPrefix("libc6") } && depends.contains("forsetti-host (>= 0.1.0)"))

    // What a customer's dpkg sees.
    #expect(try dpkgDeb(["-f", deb, "Package"]) == "com.test.packed-c\n")
    #expect(try dpkgDeb(["-f", deb, "Version"]) == "0.1.0-1\n")
    #expect(try dpkgDeb(["-f", deb, "Architecture"]) == "amd64\n")
    #expect(try dpkgDeb(["-f", deb, "Section"]) == "misc\n")
    #expect(try dpkgDeb(["-f", deb, "Maintainer"]) == Self.maintainer + "\n")
    let dependsField = try dpkgDeb(["-f", deb, "Depends"])
    #expect(dependsField.contains("libc6 (>= ") && dependsField.contains("forsetti-host (>= 0.1.0)"))
    #expect(try dpkgDeb(["-f", deb, "Description"]).hasPrefix("Packed C (Forsetti service module)\n"))
    let files = try contents(deb)
    let layout = SystemLayout.debian
    for path in [
      layout.plugin("com.Test.Packed-C.so"), layout.plugin("com.Test.Packed-C.so.sig"),
      layout.manifest(moduleID: "com.Test.Packed-C"), layout.vendorKey(moduleID: "com.Test.Packed-C"),
      "/usr/share/doc/com.test.packed-c/copyright", "/usr/share/doc/com.test.packed-c/changelog.Debian.gz",
    ] {
      #expect(files[path] == "-rw-r--r--", "\(path): \(files[path] ?? "missing") in \(files)")
    }
    #expect(files.filter { $0.value.hasPrefix("d") }.allSatisfy { $0.value == "drwxr-xr-x" }, "\(files)")
    #expect(files.keys.allSatisfy { $0.hasPrefix("/usr/") || $0 == "/" }, "\(files)")
    // No maintainer scripts: the control archive has the control file and md5sums only.
    let control = dir.url("control")
    _ = try dpkgDeb(["-e", deb, control])
    #expect(Set(try FileManager.default.contentsOfDirectory(atPath: control)) == ["control", "md5sums"])
    // The sums are right, and the module's bytes are the ones built (and signed).
    let root = dir.url("root")
    _ = try dpkgDeb(["-x", deb, root])
    let sums = try ProcessRunner.run("/usr/bin/md5sum", ["-c", control + "/md5sums"], in: root)
    #expect(sums.status == 0, "\(sums.stdout)\(sums.stderr)")
    #expect(
      try Data(contentsOf: URL(fileURLWithPath: root + layout.plugin("com.Test.Packed-C.so"))) == original)

    #expect(try lintianComplaints(deb) == [])
  }

  @Test func aStaticStdlibSwiftModulePacksCleanAndOneNeedingTheToolchainIsRefused() throws {
    // The Swift SDK as installed, so the project builds as a vendor's would.
    let prefix = dir.url("prefix")
    let binDir = (HostBinary.path as NSString).deletingLastPathComponent
    let install = try ProcessRunner.run(
      "/usr/bin/env",
      ["bash", HostBinary.packageRoot + "/scripts/install", "--prefix", prefix, "--bin-dir", binDir])
    try #require(install.status == 0, "install: \(install.stderr)")
    let project = dir.url("swiftmod")
    let made = try ProcessRunner.run(
      prefix + "/bin/forsetti-host", ["new", "--lang", "swift", "--id", "com.test.packedswift", project])
    try #require(made.status == 0, "\(made.stderr)")
    let release = try ProcessRunner.run(
      "/usr/bin/env", ["swift", "build", "-c", "release", "-Xswiftc", "-static-stdlib"], in: project)
    try #require(release.status == 0, "\(release.stdout)\(release.stderr)")

    // As the author guide does it: from the project, into the current directory (no --out).
    let r = try pack(["--maintainer", Self.maintainer], in: project)
    try #require(r.status == 0, "\(r.stdout)\(r.stderr)")
    let deb = project + "/com.test.packedswift_0.1.0-1_amd64.deb"
    #expect(try contents(deb)[SystemLayout.debian.plugin("com.test.packedswift.so")] == "-rw-r--r--")
    let depends = try dpkgDeb(["-f", deb, "Depends"])
    #expect(depends.contains("libc6") && !depends.contains("swift"), "\(depends)")
    #expect(try lintianComplaints(deb) == [])

    // Linked against the toolchain's runtime: refused, naming the library and the fix.
    let debug = try ProcessRunner.run("/usr/bin/env", ["swift", "build"], in: project)
    try #require(debug.status == 0, "\(debug.stdout)\(debug.stderr)")
    let dynamic = try pack([
      project, "--library", project + "/.build/debug/libPackedswiftModule.so", "--out", dir.path,
      "--maintainer", Self.maintainer,
    ])
    #expect(dynamic.status == 1, "\(dynamic.stdout)\(dynamic.stderr)")
    #expect(
      dynamic.stderr.contains("libswift") && dynamic.stderr.contains("which no Debian package installs"))
    #expect(dynamic.stderr.contains("-Xswiftc -static-stdlib"), "\(dynamic.stderr)")
  }

  /// Issue 41: `pack` checks the baseline the vendor names. A library calling `pthread_create`
  /// (GLIBC_2.34, built here on Debian 12) is refused for `--target debian-11` with the symbol
  /// and version named and no package written; for `--target debian-12` it is packed, its
  /// Depends what dpkg-shlibdeps computes (libc6 (>= 2.34)).
  @Test func aBaselineTheLibraryReachesPastIsRefused() throws {
    let source = """
      #include <pthread.h>
      #include <stdint.h>
      static void *idle(void *a) { return a; }
      __attribute__((visibility("default"))) const void *ENTRY(uint32_t abi) {
        pthread_t t;
        if (abi == 12345 && pthread_create(&t, NULL, idle, NULL) == 0) pthread_join(t, NULL);
        return NULL;
      }
      """
    let project = try cProject("com.test.threaded", in: "threaded", source: source, flags: ["-pthread"])
    let m = ["--maintainer", Self.maintainer, "--out", dir.path]
    let old = try pack([project, "--target", "debian-11"] + m)
    #expect(old.status == 1, "\(old.stdout)\(old.stderr)")
    #expect(old.stderr.contains("GLIBC_2.34") && old.stderr.contains("pthread_create"), "\(old.stderr)")
    #expect(old.stderr.contains("build it on debian-11"), "\(old.stderr)")
    let debs = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".deb") }
    #expect(debs.isEmpty, "a package was written: \(debs)")
    let current = try pack([project, "--target", "debian-12", "--json"] + m)
    #expect(current.status == 0, "\(current.stdout)\(current.stderr)")
    #expect(current.stdout.contains("libc6 (>= 2.34)"), "\(current.stdout)")
  }

  @Test func aProjectWithoutOneManifestOrALibraryIsRefusedSayingWhatToDo() throws {
    let m = ["--maintainer", Self.maintainer, "--out", dir.path]
    try FileManager.default.createDirectory(atPath: dir.url("empty"), withIntermediateDirectories: true)
    let none = try pack([dir.url("empty")] + m)
    #expect(none.status == 2 && none.stderr.contains("no manifest in"), "\(none.stderr)")
    #expect(none.stderr.contains("--manifest FILE"))

    let two = try cProject("com.test.two", in: "two")
    try dir.write(
      "two/manifests/other.json",
      ModuleTemplate(language: .c, moduleID: "com.test.other", type: .service, prefix: "").manifest)
    let several = try pack([two] + m)
    #expect(several.status == 2 && several.stderr.contains("2 manifests"), "\(several.stderr)")
    #expect(several.stderr.contains("two.json") && several.stderr.contains("other.json"))
    // Naming one of them packs it.
    let chosen = try pack([two, "--manifest", two + "/manifests/two.json"] + m)
    #expect(chosen.status == 0, "\(chosen.stderr)")

    try dir.write(
      "unbuilt/manifests/x.json",
      ModuleTemplate(language: .c, moduleID: "com.test.unbuilt", type: .service, prefix: "").manifest)
    let unbuilt = try pack([dir.url("unbuilt")] + m)
    #expect(unbuilt.status == 2 && unbuilt.stderr.contains("com_test_unbuilt_entry"), "\(unbuilt.stderr)")
    #expect(unbuilt.stderr.contains("make") && unbuilt.stderr.contains("--library"))

    try dir.write("invalid/manifests/x.json", #"{"schemaVersion": "1.0", "moduleID": "not an id"}"#)
    let invalid = try pack([dir.url("invalid")] + m)
    #expect(invalid.status == 1 && invalid.stderr.contains("moduleID"), "\(invalid.stderr)")
    #expect(invalid.stderr.contains("x.json"))

    let missing = try pack(
      [two, "--manifest", two + "/manifests/two.json", "--library", dir.url("nope.so")] + m)
    #expect(missing.status == 2 && missing.stderr.contains("--library \(dir.url("nope.so")): no such file"))
  }

  @Test func aLibraryTheHostWouldRefuseIsRefused() throws {
    let m = ["--maintainer", Self.maintainer, "--out", dir.path]
    // The entry point is there but hidden: the host could not call it.
    let hidden = try cProject(
      "com.test.hidden", in: "hidden",
      source: "#include <stdint.h>\nconst void *ENTRY(uint32_t abi) { (void)abi; return 0; }\n")
    let r = try pack([hidden] + m)
    #expect(r.status == 1 || r.status == 2, "\(r.stderr)")
    #expect(r.stderr.contains("com_test_hidden_entry"), "\(r.stderr)")
    let named = try pack([hidden, "--library", hidden + "/build/libhidden.so"] + m)
    #expect(
      named.status == 1 && named.stderr.contains("does not export com_test_hidden_entry"), "\(named.stderr)")
    #expect(named.stderr.contains("visibility"))

    try dir.write("notelf/libx.so", "not a library")
    let notELF = try pack([hidden, "--library", dir.url("notelf/libx.so")] + m)
    #expect(notELF.status == 1 && notELF.stderr.contains("not an ELF file"), "\(notELF.stderr)")
  }

  @Test func aNeededLibraryNoPackageInstallsIsNamed() throws {
    let helper = try CFixture.sharedObject(
      "libhelper.so", source: "int helper(int x) { return x + 1; }\n", in: dir)
    let helperDir = (helper as NSString).deletingLastPathComponent
    let source = """
      #include <stdint.h>
      int helper(int);
      __attribute__((visibility("default"))) const void *ENTRY(uint32_t abi) {
        return helper((int)abi) == 0 ? (const void *)0 : (const void *)0;
      }
      """
    let project = try cProject(
      "com.test.linked", in: "linked", source: source,
      flags: ["-L" + helperDir, "-lhelper", "-Wl,-rpath," + helperDir])
    let r = try pack([project, "--maintainer", Self.maintainer, "--out", dir.path])
    #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
    #expect(r.stderr.contains("needs libhelper.so") && r.stderr.contains("no Debian package"), "\(r.stderr)")
    #expect(r.stderr.contains("link that library statically"), "\(r.stderr)")
  }

  @Test func aStaleSignatureNoMaintainerAndNoDpkgDevAreRefused() throws {
    let project = try cProject("com.test.stale", in: "stale")
    let so = project + "/build/libstale.so"
    #expect(try HostBinary.run(["keygen", dir.url("vendor")]).status == 0)
    #expect(try HostBinary.run(["sign", so, "--key", dir.url("vendor.key")]).status == 0)
    // Rebuilt after signing: the shipped signature would not match.
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: so))
    try handle.seekToEnd()
    try handle.write(contentsOf: Data([0]))
    try handle.close()
    let stale = try pack([
      project, "--public-key", dir.url("vendor.pub"), "--maintainer", Self.maintainer, "--out", dir.path,
    ])
    #expect(stale.status == 1 && stale.stderr.contains("changed after it was signed"), "\(stale.stderr)")
    #expect(stale.stderr.contains("forsetti-host sign"))

    let nobody = try ProcessRunner.run(
      "/usr/bin/env",
      ["-u", "DEBFULLNAME", "-u", "DEBEMAIL", HostBinary.path, "pack", project, "--out", dir.path])
    #expect(nobody.status == 2 && nobody.stderr.contains("no maintainer"), "\(nobody.stderr)")
    #expect(nobody.stderr.contains("DEBFULLNAME"))
    let fromEnvironment = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "DEBFULLNAME=Env Vendor", "DEBEMAIL=env@example.org", HostBinary.path, "pack", project, "--out",
        dir.path, "--json",
        "--signature", dir.url("none.sig"),
      ])
    #expect(
      fromEnvironment.status == 2 && fromEnvironment.stderr.contains("--signature"),
      "\(fromEnvironment.stderr)")

    let noTools = try ProcessRunner.run(
      "/usr/bin/env",
      ["PATH=/nonexistent", HostBinary.path, "pack", project, "--maintainer", Self.maintainer])
    #expect(noTools.status == 2 && noTools.stderr.contains("apt-get install dpkg-dev"), "\(noTools.stderr)")
  }

  @Test func helpSaysWhereFilesGoAndThatNothingIsTrusted() throws {
    let r = try HostBinary.run(["pack", "--help"])
    #expect(r.status == 0)
    for text in [
      "/usr/lib/forsetti/plugins", "/usr/lib/forsetti/manifests", "/usr/share/forsetti/keys",
      "trusts nothing",
      "--manifest FILE", "--library FILE.so", "--signature FILE", "--public-key FILE", "--out DIR",
      "--maintainer NAME", "--json", "-static-stdlib", "apt-get install dpkg-dev", "EXIT STATUS",
    ] {
      #expect(r.stdout.contains(text), "help lacks \(text)")
    }
    #expect(try HostBinary.run(["--help"]).stdout.contains("  pack "))
  }
}
