import ForsettiBinary
import ForsettiCore
import Testing

@testable import ForsettiCLI

/// The pure rules of `forsetti-host pack`: names, versions, architectures, the control file and
/// what dpkg-shlibdeps says, read. The real tools run in PackCommandTests.
@Suite struct PackRulesTests {
  func name(_ id: String) -> String? { try? DebianPackageName.from(moduleID: id).get() }

  @Test func moduleIDsBecomeDebianPackageNames() {
    #expect(name("com.vendor.thing") == "com.vendor.thing")
    #expect(name("com.Vendor.MyThing") == "com.vendor.mything")
    #expect(name("com.vendor.my-thing") == "com.vendor.my-thing")
    #expect(name("com.vendor.my_thing") == "com.vendor.my-thing")
    #expect(name("org.c++.x") == "org.c++.x")
    #expect(name("9lives.cat") == "9lives.cat")
  }

  @Test func hostileModuleIDsAreMadeSafeOrRefused() {
    // Every character outside [a-z0-9+.-] becomes one "-": nothing else reaches the name.
    #expect(name("com.vendor.thing\nDepends: evil") == "com.vendor.thing-depends--evil")
    #expect(name("com.vendor/../../etc") == "com.vendor-..-..-etc")
    #expect(name("com.vendör.thing") == "com.vend-r.thing")
    #expect(name("com.vendor.th ing_") == "com.vendor.th-ing-")
    for id in ["", "a", ".com.vendor", "-x", "_thing", "é.thing", " com.x", "\u{0}ab"] {
      #expect(name(id) == nil, "\(id.debugDescription) should be refused")
    }
    if case .failure(let e) = DebianPackageName.from(moduleID: "_x.y") {
      #expect(e.exitCode == .blocked)
      #expect(e.description.contains("_x.y") && e.description.contains("letter or digit"))
    } else {
      Issue.record("_x.y was accepted")
    }
  }

  @Test func versionsMapPrereleasesBelowTheirRelease() {
    #expect(DebianVersion.package(SemanticVersion(1, 2, 3)) == "1.2.3-1")
    #expect(DebianVersion.package(SemanticVersion(1, 2, 0, prerelease: "rc.1")) == "1.2.0~rc.1-1")
    #expect(DebianVersion.upstream(SemanticVersion(0, 1, 0, prerelease: "beta-2.x")) == "0.1.0~beta-2.x")
    #expect(DebianVersion.upstream(SemanticVersion(2, 0, 0)) == "2.0.0")
  }

  @Test func architecturesComeFromTheELFHeader() {
    #expect(DebianArchitecture.of(.elf64, .x86_64) == "amd64")
    #expect(DebianArchitecture.of(.elf64, .aarch64) == "arm64")
    #expect(DebianArchitecture.of(.elf32, .x86) == "i386")
    #expect(DebianArchitecture.of(.elf32, .arm) == "armhf")
    #expect(DebianArchitecture.of(.elf64, .riscv) == "riscv64")
    // x32 (64-bit machine, 32-bit class) and unknown machines have no architecture here.
    #expect(DebianArchitecture.of(.elf32, .x86_64) == nil)
    #expect(DebianArchitecture.of(.elf64, .init(rawValue: 9999)) == nil)
  }

  @Test func maintainersAreNameAndAddress() {
    let ok = { (s: String) in (try? Maintainer.check(s, source: "--maintainer").get()) }
    #expect(ok("Ada Lovelace <ada@example.org>") == "Ada Lovelace <ada@example.org>")
    #expect(ok("  Ada <ada@example.org> ") == "Ada <ada@example.org>")
    for bad in [
      "", "ada@example.org", "<ada@example.org>", "Ada <ada>", "Ada <a b@example.org>",
      "Ada <ada@example.org>\nDepends: evil", "Ada <ada@example.org> x", "A, B <ab@example.org>",
    ] {
      #expect(ok(bad) == nil, "\(bad.debugDescription) accepted")
    }
    let env = { (e: [String: String]) in try? Maintainer.resolve(given: nil, environment: e).get() }
    #expect(env(["DEBFULLNAME": "Ada", "DEBEMAIL": "ada@example.org"]) == "Ada <ada@example.org>")
    #expect(env(["DEBEMAIL": "Ada <ada@example.org>"]) == "Ada <ada@example.org>")
    #expect(env(["DEBEMAIL": "ada@example.org"]) == nil)
    #expect(env([:]) == nil)
    if case .failure(let e) = Maintainer.resolve(given: nil, environment: [:]) {
      #expect(e.exitCode == .usage && e.fix?.contains("--maintainer") == true)
    }
  }

  func manifest(displayName: String = "Thing", version: SemanticVersion = .init(1, 0, 0)) -> ModuleManifest {
    ModuleManifest(
      moduleID: "com.vendor.thing", displayName: displayName, moduleVersion: version, moduleType: .service,
      minForsettiVersion: .init(0, 1, 0), entryPoint: "com_vendor_thing_entry")
  }

  @Test func theControlFileCannotBeExtendedByTheManifest() {
    let (synopsis, paragraphs) = DebianControl.description(
      of: manifest(displayName: "Thing\nDepends: evil\u{7}\n.\n" + String(repeating: "x", count: 200)),
      layout: .debian, shipsKey: true)
    let control = DebianControl(
      package: "com.vendor.thing", version: "1.0.0-1", architecture: "amd64", maintainer: "A <a@example.org>",
      installedSizeKiB: 12, depends: ["libc6 (>= 2.34)", "forsetti-host (>= 0.1.0)"], synopsis: synopsis,
      paragraphs: paragraphs)
    let lines = control.text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
    // Fields start at column 0; every other line is a continuation of Description.
    let fields = lines.filter { !$0.hasPrefix(" ") }.map { $0.split(separator: ":")[0] }
    #expect(
      fields == [
        "Package", "Version", "Architecture", "Maintainer", "Installed-Size", "Depends",
        "Section", "Priority",
        "Description",
      ])
    #expect(lines.filter { $0.hasPrefix(" ") }.allSatisfy { $0.count <= 80 }, "\(control.text)")
    #expect(synopsis.count <= 80 && synopsis.hasSuffix("(Forsetti service module)"))
    #expect(control.text.contains("Depends: libc6 (>= 2.34), forsetti-host (>= 0.1.0)\n"))
    #expect(control.text.contains("Section: misc\n"))
    // Paragraphs are separated by " ." and nothing else is a lone dot.
    #expect(lines.filter { $0 == " ." }.count == paragraphs.count - 1)
    #expect(control.text.contains("/usr/share/forsetti/keys/com.vendor.thing.pub"))
    #expect(control.text.contains("not trusted"))
  }

  @Test func thePlanPutsFilesWhereTheSystemLayoutSays() throws {
    let layout = SystemLayout.debian
    #expect(layout.plugins == "/usr/lib/forsetti/plugins")
    #expect(layout.manifests == "/usr/lib/forsetti/manifests")
    #expect(layout.vendorKey(moduleID: "com.vendor.thing") == "/usr/share/forsetti/keys/com.vendor.thing.pub")
    let facts = ELFFactsFixture.facts(path: "/src/build/libthing.so", needed: ["libc.so.6"], symtab: false)
    let inputs = PackInputs(
      manifestPath: "/src/manifests/thing.json",
      manifest: manifest(version: .init(2, 0, 0, prerelease: "rc.1")),
      libraryPath: "/src/build/libthing.so", library: facts, signaturePath: "/keys/any.sig",
      publicKeyPath: "/keys/vendor.pub", publicKey: nil)
    let plan = try PackagePlan.make(inputs, maintainer: "A <a@example.org>", date: 1_764_000_000)
    #expect(plan.debName == "com.vendor.thing_2.0.0~rc.1-1_amd64.deb")
    let paths = Dictionary(uniqueKeysWithValues: plan.entries.map { ($0.path, $0.content) })
    #expect(paths["/usr/lib/forsetti/plugins/com.vendor.thing.so"] == .copy(from: "/src/build/libthing.so"))
    #expect(paths["/usr/lib/forsetti/plugins/com.vendor.thing.so.sig"] == .copy(from: "/keys/any.sig"))
    #expect(
      paths["/usr/lib/forsetti/manifests/com.vendor.thing.json"] == .copy(from: "/src/manifests/thing.json"))
    #expect(paths["/usr/share/forsetti/keys/com.vendor.thing.pub"] == .copy(from: "/keys/vendor.pub"))
    #expect(paths["/usr/share/doc/com.vendor.thing/copyright"] != nil)
    #expect(paths["/usr/share/doc/com.vendor.thing/changelog.Debian.gz"] != nil)
    #expect(plan.entries.allSatisfy { $0.mode == 0o644 })
    let control = plan.control(libraryDepends: ["libc6 (>= 2.34)"], installedSizeKiB: 20)
    #expect(control.depends == ["libc6 (>= 2.34)", "forsetti-host (>= 0.1.0)"])
    // Only the overrides that apply: a stripped library that needs libc has none of them.
    guard case .text(let overrides)? = paths["/usr/share/lintian/overrides/com.vendor.thing"] else {
      Issue.record("no overrides")
      return
    }
    #expect(overrides.contains("initial-upload-closes-no-bugs"))
    #expect(!overrides.contains("unstripped") && !overrides.contains("lacks-prerequisites"))
    let all = PackageDocuments.lintianOverrides(
      package: "p", library: "/usr/lib/forsetti/plugins/l.so", unstripped: true, needsNothing: true)
    #expect(all.contains("p: unstripped-binary-or-object [usr/lib/forsetti/plugins/l.so]"))
    #expect(all.contains("p: shared-library-lacks-prerequisites [usr/lib/forsetti/plugins/l.so]"))
  }

  @Test func aForeignMachineWithoutADebianArchitectureIsRefused() {
    var facts = ELFFactsFixture.facts(path: "/x/libx.so", needed: [], symtab: false)
    facts.machine = .init(rawValue: 9999)
    let inputs = PackInputs(
      manifestPath: "/x/m.json", manifest: manifest(), libraryPath: "/x/libx.so", library: facts)
    #expect(throws: PackError.self) { try PackagePlan.make(inputs, maintainer: "A <a@example.org>", date: 0) }
  }

  @Test func dpkgShlibdepsAccountsAreRead() {
    let ok = SharedLibraryDependencies.read(
      stdout: """
        dpkg-shlibdeps: debug: Library libc.so.6 found in /lib/x86_64-linux-gnu/libc.so.6
        shlibs:Depends=libc6 (>= 2.34), libgcc-s1 (>= 3.3)
        """, stderr: "dpkg-shlibdeps: warning: package could avoid a useless dependency")
    #expect(ok == .depends(["libc6 (>= 2.34)", "libgcc-s1 (>= 3.3)"]))
    let swift = SharedLibraryDependencies.read(
      stdout: """
        dpkg-shlibdeps: debug: Library libswiftCore.so found in /opt/swift/usr/lib/swift/linux/libswiftCore.so
        dpkg-shlibdeps: debug: No associated package found for /opt/swift/usr/lib/swift/linux/libswiftCore.so
        shlibs:Depends=libc6 (>= 2.14)
        """, stderr: "")
    #expect(
      swift
        == .unpackaged(library: "libswiftCore.so", foundAt: "/opt/swift/usr/lib/swift/linux/libswiftCore.so"))
    #expect(SharedLibraryDependencies.isSwiftRuntime("libswiftCore.so"))
    #expect(!SharedLibraryDependencies.isSwiftRuntime("libhelper.so"))
    let missing = SharedLibraryDependencies.read(
      stdout: "",
      stderr:
        "dpkg-shlibdeps: warning: cannot find library libhelper.so needed by debian/p/usr/lib/forsetti/plugins/l.so (ELF format: 'elf64-x86-64')"
    )
    #expect(missing == .unpackaged(library: "libhelper.so", foundAt: nil))
  }
}

/// ELF facts as inspection reports them, without a file.
enum ELFFactsFixture {
  static func facts(path: String, needed: [String], symtab: Bool) -> ELFFacts {
    ELFFacts(
      path: path, fileSize: 1000, elfClass: .elf64, machine: .x86_64, isSharedObject: true,
      symbolTable: SymbolTable(), embeddedManifest: nil, neededLibraries: needed, hasSymbolTable: symtab)
  }
}

/// Tools that are not there, or fail, as a ToolRunner reports them.
struct AbsentTools: ToolRunner {
  var present: Set<String>
  func locate(_ tool: String) -> String? { present.contains(tool) ? "/usr/bin/" + tool : nil }
  func run(_ tool: String, _ arguments: [String], in directory: String) -> Result<ToolRun, PackError> {
    .success(ToolRun(status: 2, stdout: "", stderr: "\(tool): something broke"))
  }
}

@Suite struct PackToolTests {
  @Test func missingDpkgDevIsAConfigurationErrorNamingThePackage() {
    let builder = DebianPackageBuilder(tools: AbsentTools(present: ["dpkg-deb"]))
    #expect(throws: PackError.missingTools(["dpkg-shlibdeps"])) { try builder.checkTools() }
    #expect(PackError.missingTools(["dpkg-shlibdeps"]).exitCode == .usage)
    #expect(PackError.missingTools(["dpkg-shlibdeps"]).fix == "apt-get install dpkg-dev")
  }

  @Test func aFailingToolIsReportedWithWhatItPrinted() {
    let builder = DebianPackageBuilder(tools: AbsentTools(present: ["dpkg-deb", "dpkg-shlibdeps"]))
    #expect(throws: PackError.tool(name: "dpkg-deb", status: 2, output: "dpkg-deb: something broke")) {
      _ = try builder.run("dpkg-deb", ["--build"], in: "/")
    }
  }
}
