import ForsettiBinary
import ForsettiTestSupport
import Foundation
import Testing

/// `LibraryResolver` against glibc's own loader: each module is a real `.so` built by `cc` in
/// the test, and what the resolver finds is compared with what `ldd` (the loader, tracing)
/// maps for it — the same file for every library the loader finds, "not found" where it finds
/// none, and an error where it stops.
@Suite(.onTestThreads) struct LibraryResolverTests {
  let dir = TemporaryDirectory("libresolve")

  /// What the loader says of a module, read from `ldd`'s lines.
  struct LoaderReport {
    /// DT_NEEDED name → the path the loader mapped.
    var resolved: [String: String] = [:]
    var notFound: Set<String> = []
    /// Objects named by path (`/lib64/ld-linux-x86-64.so.2`, a DT_NEEDED with a slash).
    var byPath: Set<String> = []
    /// The loader's error, when it stopped.
    var error: String?
  }

  /// `ldd module` in an empty environment (no LD_LIBRARY_PATH of the test's).
  static func ldd(_ module: String) throws -> LoaderReport {
    let r = try ProcessRunner.run("/usr/bin/env", ["-i", "/usr/bin/ldd", module])
    var out = LoaderReport()
    for raw in r.stdout.split(separator: "\n") {
      let line = raw.trimmingCharacters(in: .whitespaces)
      if let arrow = line.range(of: " => ") {
        let name = String(line[..<arrow.lowerBound])
        let rest = line[arrow.upperBound...]
        if rest.hasPrefix("not found") {
          out.notFound.insert(name)
        } else if let addr = rest.range(of: " (0x") {
          out.resolved[name] = String(rest[..<addr.lowerBound])
        }
      } else if line.hasPrefix("/"), let addr = line.range(of: " (0x") {
        out.byPath.insert(String(line[..<addr.lowerBound]))
      }
    }
    // ldd passes the loader's error on on its standard output.
    let said = r.stdout + r.stderr
    if said.contains("error while loading shared libraries") { out.error = said }
    return out
  }

  /// The resolver, reading the system's loader cache as the host does.
  static func resolve(_ module: String, cache: LoaderCache? = LoaderCache.system()) throws
    -> LibraryResolver.Resolution
  {
    let facts = try ELFInspector.inspect(module).get()
    return LibraryResolver(cache: cache).resolve(facts, path: module)
  }

  /// The resolver and the loader agree on `module`: the same file for each library the loader
  /// maps (but the loader itself, which it maps under its own path), missing where it says
  /// "not found".
  static func expectAgreement(
    _ module: String, _ r: LibraryResolver.Resolution, _ loader: LoaderReport,
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    #expect(loader.error == nil, "the loader stopped: \(loader.error ?? "")", sourceLocation: sourceLocation)
    for (name, path) in loader.resolved {
      let found = r.found.first { $0.name == name }
      #expect(
        found?.path == path, "\(name): loader \(path), resolver \(found?.path ?? "nothing")",
        sourceLocation: sourceLocation)
    }
    for name in loader.notFound {
      #expect(
        r.missing.contains { $0.name == name }, "\(name): the loader found none",
        sourceLocation: sourceLocation)
    }
    for f in r.found where !f.name.hasPrefix("ld-linux") {
      let agrees = f.source == .path ? loader.byPath.contains(f.path) : loader.resolved[f.name] == f.path
      #expect(
        agrees, "\(f.name) → \(f.path) (\(f.source.rawValue)) is not what the loader maps for \(module)",
        sourceLocation: sourceLocation)
    }
    for m in r.missing {
      #expect(
        loader.notFound.contains(m.name), "\(m.name): the loader found it", sourceLocation: sourceLocation)
    }
  }

  /// Builds `relative` (in the test's directory) from `source` with `flags`, its directory
  /// made first.
  @discardableResult
  func build(_ relative: String, _ source: String, _ flags: [String] = []) throws -> String {
    try FileManager.default.createDirectory(
      atPath: (dir.url(relative) as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    return try CFixture.sharedObject(relative, source: source, in: dir, extraFlags: flags)
  }

  /// A library `lib<name>.so` (its soname) exporting `<name>_value`, calling `calls` if given.
  @discardableResult
  func library(_ relative: String, _ name: String, calls: String? = nil, _ flags: [String] = []) throws
    -> String
  {
    let body =
      calls.map { "int \($0)_value(void);\nint \(name)_value(void) { return \($0)_value() + 1; }\n" }
      ?? "int \(name)_value(void) { return 1; }\n"
    return try build(relative, body, ["-Wl,-soname,lib\(name).so"] + flags)
  }

  /// A module calling `<name>_value` of each of `needs`, linked against them in `linkDirs`.
  func module(_ relative: String, needs: [String], linkDirs: [String], _ flags: [String] = []) throws
    -> String
  {
    let decls = needs.map { "int \($0)_value(void);" }.joined(separator: "\n")
    let sum = needs.map { "\($0)_value()" }.joined(separator: " + ")
    let source = "\(decls)\nint forsetti_entry(void) { return \(sum.isEmpty ? "0" : sum); }\n"
    // Without --as-needed libc is needed too, as by any module that calls it.
    return try build(
      relative, source,
      linkDirs.map { "-L" + dir.url($0) } + needs.map { "-l\($0)" } + flags + ["-Wl,--no-as-needed"])
  }

  /// `relative`'s path with links resolved, as `Resolution.directories` gives it.
  func real(_ relative: String) -> String { LibraryResolver.realPath(dir.url(relative)) ?? dir.url(relative) }

  @Test func runpathWithOriginFindsTheModulesOwnLibrary() throws {
    let lib = try library("m/libs/libalpha.so", "alpha")
    let so = try module(
      "m/module.so", needs: ["alpha"], linkDirs: ["m/libs"], ["-Wl,--enable-new-dtags,-rpath,$ORIGIN/libs"])
    let facts = try ELFInspector.inspect(so).get()
    #expect(facts.searchPaths.runPath == "$ORIGIN/libs")
    #expect(facts.searchPaths.rPath == nil)
    let r = try Self.resolve(so)
    let alpha = try #require(r.found.first { $0.name == "libalpha.so" })
    #expect(alpha.path == lib)
    #expect(alpha.source == .runPath)
    #expect(alpha.neededBy == so)
    // libc from the cache, as for any C library.
    #expect(r.found.first { $0.name == "libc.so.6" }?.source == .cache)
    #expect(r.directories.contains(real("m/libs")))
    #expect(r.missing.isEmpty)
    Self.expectAgreement(so, r, try Self.ldd(so))
  }

  @Test func rpathIsSearchedAndPassedDownOnlyWithoutRunpath() throws {
    // r/ holds libleaf; the module names r/ in its DT_RPATH. libplain (no paths of its own)
    // finds libleaf through the module's DT_RPATH; libwithrun (a DT_RUNPATH of u/, which
    // lacks libleaf) does not: an object with DT_RUNPATH searches no DT_RPATH.
    let leaf = try library("r/libleaf.so", "leaf")
    try library("r/libplain.so", "plain", calls: "leaf", ["-L" + dir.url("r"), "-lleaf"])
    try FileManager.default.createDirectory(atPath: dir.url("u"), withIntermediateDirectories: true)
    try library(
      "r/libwithrun.so", "withrun", calls: "leaf",
      ["-L" + dir.url("r"), "-lleaf", "-Wl,--enable-new-dtags,-rpath," + dir.url("u")])
    let plain = try module(
      "p/plain.so", needs: ["plain"], linkDirs: ["r"], ["-Wl,--disable-new-dtags,-rpath," + dir.url("r")])
    let withRun = try module(
      "w/withrun.so", needs: ["withrun"], linkDirs: ["r"], ["-Wl,--disable-new-dtags,-rpath," + dir.url("r")])
    #expect(try ELFInspector.inspect(plain).get().searchPaths.rPath == dir.url("r"))

    let a = try Self.resolve(plain)
    #expect(a.found.first { $0.name == "libplain.so" }?.source == .rPath)
    let inherited = try #require(a.found.first { $0.name == "libleaf.so" })
    #expect(inherited.path == leaf)
    #expect(inherited.source == .rPath)
    #expect(inherited.neededBy == dir.url("r/libplain.so"))
    Self.expectAgreement(plain, a, try Self.ldd(plain))

    let b = try Self.resolve(withRun)
    #expect(b.found.contains { $0.name == "libwithrun.so" })
    let missing = try #require(b.missing.first { $0.name == "libleaf.so" })
    #expect(missing.neededBy == dir.url("r/libwithrun.so"))
    #expect(!missing.searched.contains(dir.url("r")), "searched: \(missing.searched)")
    #expect(missing.searched.first == dir.url("u"))
    let loader = try Self.ldd(withRun)
    #expect(loader.notFound.contains("libleaf.so"))
    Self.expectAgreement(withRun, b, loader)
  }

  @Test func aLibraryNoPlaceHoldsIsReportedMissingByName() throws {
    // Linked against a stub that is then removed: the loader finds it nowhere.
    try library("gone/libnowhere.so", "nowhere")
    let so = try module("m/module.so", needs: ["nowhere"], linkDirs: ["gone"])
    try FileManager.default.removeItem(atPath: dir.url("gone"))
    let r = try Self.resolve(so)
    let m = try #require(r.missing.first)
    #expect(r.missing.count == 1)
    #expect(m.name == "libnowhere.so")
    #expect(m.neededBy == so)
    #expect(m.unusable == nil)
    #expect(m.searched.contains(LoaderCache.systemPath))
    for d in LibraryResolver.defaultDirectories(elfClass: .host, machine: .host) {
      #expect(m.searched.contains(d), "\(d) not searched: \(m.searched)")
    }
    #expect(!r.directories.contains(real("gone")))
    Self.expectAgreement(so, r, try Self.ldd(so))
  }

  /// A file of another class or machine by the library's name, earlier on the path, is
  /// passed by (by the loader and the resolver); the right one further on is found.
  @Test(arguments: ["32-bit", "other machine"])
  func aForeignLibraryEarlierOnThePathIsPassedBy(_ kind: String) throws {
    let right = try library("b/libgamma.so", "gamma")
    try FileManager.default.createDirectory(atPath: dir.url("a"), withIntermediateDirectories: true)
    switch kind {
    case "32-bit":
      // No 32-bit libc is needed for an object that uses none.
      try build(
        "a/libgamma.so", "int gamma_value(void) { return 2; }\n",
        ["-m32", "-nostdlib", "-Wl,-soname,libgamma.so"])
      #expect(try ELFInspector.inspect(dir.url("a/libgamma.so")).get().elfClass == .elf32)
    default:
      var bytes = try #require(FileManager.default.contents(atPath: right).map { [UInt8]($0) })
      // e_machine: another architecture of the same class.
      let other: UInt16 = ELFMachine.host == .aarch64 ? 62 : 183
      bytes[18] = UInt8(truncatingIfNeeded: other)
      bytes[19] = UInt8(truncatingIfNeeded: other >> 8)
      try dir.write("a/libgamma.so", bytes: bytes)
      #expect(try ELFInspector.inspect(dir.url("a/libgamma.so")).get().machine.rawValue == other)
    }
    let so = try module(
      "m/module.so", needs: ["gamma"], linkDirs: ["b"],
      ["-Wl,--enable-new-dtags,-rpath," + dir.url("a") + ":" + dir.url("b")])
    let r = try Self.resolve(so)
    let gamma = try #require(r.found.first { $0.name == "libgamma.so" })
    #expect(gamma.path == right)
    #expect(!r.directories.contains(real("a")))
    Self.expectAgreement(so, r, try Self.ldd(so))
  }

  /// Any other file by the name (not ELF, an executable, a directory) ends the loader's search
  /// with an error: the resolver reports the library unusable there and grants nothing further
  /// on, where the loader would never look.
  @Test(arguments: ["text", "executable", "position-independent executable", "directory", "empty"])
  func anUnloadableFileEarlierOnThePathStopsTheSearch(_ kind: String) throws {
    try library("b/libdelta.so", "delta")
    let bad = dir.url("a/libdelta.so")
    try FileManager.default.createDirectory(atPath: dir.url("a"), withIntermediateDirectories: true)
    switch kind {
    case "text": try dir.write("a/libdelta.so", "INPUT(-ldelta)\n")
    case "empty": try dir.write("a/libdelta.so", "")
    case "directory": try FileManager.default.createDirectory(atPath: bad, withIntermediateDirectories: true)
    default:
      let src = try dir.write("src/main.c", "int main(void) { return 0; }\n")
      let pie = kind != "executable"
      let r = try ProcessRunner.run(
        "/usr/bin/env", ["cc", pie ? "-pie" : "-no-pie", pie ? "-fPIE" : "-fno-PIE", "-o", bad, src])
      try #require(r.status == 0, "\(r.stderr)")
    }
    let so = try module(
      "m/module.so", needs: ["delta"], linkDirs: ["b"],
      ["-Wl,--enable-new-dtags,-rpath," + dir.url("a") + ":" + dir.url("b")])
    let r = try Self.resolve(so)
    #expect(!r.found.contains { $0.name == "libdelta.so" })
    let m = try #require(r.missing.first { $0.name == "libdelta.so" })
    #expect(m.unusable?.hasPrefix(bad + ": ") == true, "\(m.unusable ?? "nil")")
    #expect(m.searched == [dir.url("a")])
    #expect(!r.directories.contains(real("b")))
    let loader = try Self.ldd(so)
    let error = try #require(loader.error, "the loader mapped \(loader.resolved)")
    #expect(error.contains("libdelta.so"))
  }

  @Test func nodefaultlibKeepsTheDefaultDirectoriesAndTheirCacheEntriesOut() throws {
    try library("own/libepsilon.so", "epsilon")
    // libm from the system; with -z nodefaultlib the loader finds neither it nor libc.
    let so = try module(
      "m/module.so", needs: ["epsilon"], linkDirs: ["own"],
      ["-Wl,--no-as-needed", "-lm", "-Wl,-z,nodefaultlib", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../own"])
    #expect(try ELFInspector.inspect(so).get().searchPaths.noDefaultLibraries)
    let r = try Self.resolve(so)
    #expect(r.found.map(\.name) == ["libepsilon.so"])
    #expect(Set(r.missing.map(\.name)) == ["libm.so.6", "libc.so.6"])
    for m in r.missing {
      for d in LibraryResolver.defaultDirectories(elfClass: .host, machine: .host) {
        #expect(!m.searched.contains(d), "\(m.name): \(d) searched")
      }
    }
    let loader = try Self.ldd(so)
    #expect(loader.notFound == ["libm.so.6", "libc.so.6"])
    Self.expectAgreement(so, r, loader)

    // Positive control: the same module without the flag finds both where the loader does.
    let plain = try module(
      "m/plain.so", needs: ["epsilon"], linkDirs: ["own"],
      ["-Wl,--no-as-needed", "-lm", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../own"])
    let p = try Self.resolve(plain)
    #expect(p.missing.isEmpty)
    Self.expectAgreement(plain, p, try Self.ldd(plain))
  }

  /// With DF_1_NODEFLIB the loader still takes a cache entry outside the default directories
  /// (a directory of ld.so.conf). Checked against the loader reading that cache: a cache
  /// written by ldconfig, mounted over /etc/ld.so.cache in a mount namespace of ldd's own.
  @Test func nodefaultlibStillTakesCacheEntriesOutsideTheDefaultDirectories() throws {
    try #require(geteuid() == 0, "mounting a cache over /etc/ld.so.cache for the loader needs root")
    let lib = try library("conf/libzeta.so", "zeta")
    let conf = try dir.write("ld.so.conf", dir.url("conf") + "\n")
    let cacheFile = dir.url("ld.so.cache")
    let made = try ProcessRunner.run("/sbin/ldconfig", ["-X", "-i", "-C", cacheFile, "-f", conf])
    try #require(made.status == 0, "\(made.stderr)")
    let cache = try #require(LoaderCache.system(path: cacheFile))
    let so = try module("m/module.so", needs: ["zeta"], linkDirs: ["conf"], ["-Wl,-z,nodefaultlib"])
    let r = try Self.resolve(so, cache: cache)
    let zeta = try #require(r.found.first { $0.name == "libzeta.so" })
    #expect(zeta.path == lib)
    #expect(zeta.source == .cache)
    // libc is in the cache too, but in a default directory: refused.
    #expect(r.missing.map(\.name) == ["libc.so.6"])

    let script = "mount --bind \"$1\" /etc/ld.so.cache && exec /usr/bin/env -i /usr/bin/ldd \"$2\""
    let run = try ProcessRunner.run(
      "/usr/bin/unshare", ["-m", "--propagation", "private", "/bin/sh", "-c", script, "sh", cacheFile, so])
    try #require(run.stdout.contains("=>"), "ldd under the mounted cache: \(run.stdout) \(run.stderr)")
    #expect(run.stdout.contains("libzeta.so => \(lib) "), "\(run.stdout)")
    #expect(run.stdout.contains("libc.so.6 => not found"), "\(run.stdout)")
  }

  @Test func dependenciesOfDependenciesAreFoundOnce() throws {
    // module → liba, libb; liba → libb, libc_; libb → libc_; each library beside the one that
    // needs it ($ORIGIN), libc_ one level down.
    try library("m/libs/deep/libcee.so", "cee")
    try library(
      "m/libs/libbee.so", "bee", calls: "cee",
      ["-L" + dir.url("m/libs/deep"), "-lcee", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/deep"])
    try build(
      "m/libs/libay.so",
      "int bee_value(void); int cee_value(void);\nint ay_value(void) { return bee_value() + cee_value(); }\n",
      [
        "-Wl,-soname,libay.so", "-L" + dir.url("m/libs"), "-L" + dir.url("m/libs/deep"), "-lbee", "-lcee",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN:$ORIGIN/deep",
      ])
    let so = try module(
      "m/module.so", needs: ["ay", "bee"], linkDirs: ["m/libs"],
      ["-Wl,--enable-new-dtags,-rpath,$ORIGIN/libs"])
    let r = try Self.resolve(so)
    let names = r.found.map(\.name)
    for name in ["libay.so", "libbee.so", "libcee.so", "libc.so.6"] {
      #expect(names.filter { $0 == name }.count == 1, "\(name) in \(names)")
    }
    #expect(r.found.first { $0.name == "libcee.so" }?.neededBy == dir.url("m/libs/libay.so"))
    #expect(r.directories.contains(real("m/libs/deep")))
    #expect(r.missing.isEmpty)
    Self.expectAgreement(so, r, try Self.ldd(so))
  }

  @Test func tokensAreExpandedAsTheLoaderExpandsThem() throws {
    // $LIB in a DT_RUNPATH, ${ORIGIN} in braces, $ORIGIN in a DT_NEEDED name (its soname).
    let triplet = try #require(
      LibraryResolver.defaultDirectories(elfClass: .host, machine: .host).first.map {
        ($0 as NSString).lastPathComponent
      })
    let inLib = try library("m/lib/\(triplet)/libeta.so", "eta")
    let named = try build(
      "m/named/libtheta.so", "int theta_value(void) { return 3; }\n",
      ["-Wl,-soname,$ORIGIN/named/libtheta.so"])
    let so = try module(
      "m/module.so", needs: ["eta", "theta"], linkDirs: ["m/lib/\(triplet)", "m/named"],
      ["-Wl,--enable-new-dtags,-rpath,${ORIGIN}/$LIB"])
    let r = try Self.resolve(so)
    #expect(r.found.first { $0.name == "libeta.so" }?.path == inLib)
    let theta = try #require(r.found.first { $0.name == "$ORIGIN/named/libtheta.so" })
    #expect(theta.path == named)
    #expect(theta.source == .path)
    Self.expectAgreement(so, r, try Self.ldd(so))

    // $ORIGINAL is no token: the loader searches a directory literally so named, and so does
    // the resolver (which finds the library there, not in an "$ORIGIN" + "AL" directory).
    let literal = try library("$ORIGINAL/libiota.so", "iota")
    try library("mAL/libiota.so", "iota")
    let lit = try module(
      "m/lit.so", needs: ["iota"], linkDirs: ["mAL"],
      ["-Wl,--enable-new-dtags,-rpath," + dir.path + "/$ORIGINAL:$ORIGINAL"])
    let l = try Self.resolve(lit)
    #expect(l.found.first { $0.name == "libiota.so" }?.path == literal)
    Self.expectAgreement(lit, l, try Self.ldd(lit))
  }

  /// `$PLATFORM` is the CPU's on x86-64 (glibc picks `haswell` on such CPUs): not guessed,
  /// so never a path the loader does not take.
  @Test func platformIsNeverGuessed() throws {
    try library("m/x86_64/libkappa.so", "kappa")
    try library("m/haswell/libkappa.so", "kappa")
    try library("m/aarch64/libkappa.so", "kappa")
    let so = try module(
      "m/module.so", needs: ["kappa"], linkDirs: ["m/x86_64"],
      ["-Wl,--enable-new-dtags,-rpath,$ORIGIN/$PLATFORM"])
    let r = try Self.resolve(so)
    let loader = try Self.ldd(so)
    #expect(loader.resolved["libkappa.so"] != nil, "the loader expands $PLATFORM to one of these")
    if let found = r.found.first(where: { $0.name == "libkappa.so" }) {
      #expect(loader.resolved["libkappa.so"] == found.path)
    } else {
      #expect(ELFMachine.host == .x86_64, "only x86-64's $PLATFORM is left unexpanded")
      #expect(r.missing.map(\.name) == ["libkappa.so"])
    }
  }

  @Test func aModuleNamingMoreObjectsThanTheCapIsCutShort() throws {
    let one = try library("many/liblambda.so", "lambda")
    let names = (0..<(LibraryResolver.maxObjects + 50)).map { "libmany\($0).so" }
    for name in names {
      try FileManager.default.createSymbolicLink(atPath: dir.url("many/\(name)"), withDestinationPath: one)
    }
    let base = try module("m/module.so", needs: ["lambda"], linkDirs: ["many"])
    var facts = try ELFInspector.inspect(base).get()
    facts.neededLibraries = names
    facts.searchPaths = LibrarySearchPaths(runPath: dir.url("many"))
    let r = LibraryResolver(cache: nil).resolve(facts, path: base)
    #expect(r.truncated)
    #expect(r.found.count == LibraryResolver.maxObjects - 1)
    #expect(r.directories == [real("many")])
    // Under the cap, nothing is cut.
    facts.neededLibraries = Array(names.prefix(10))
    let small = LibraryResolver(cache: nil).resolve(facts, path: base)
    #expect(!small.truncated)
    #expect(small.found.count == 10)
  }
}
