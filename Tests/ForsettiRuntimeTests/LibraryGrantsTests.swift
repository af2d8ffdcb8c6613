import ForsettiRuntime
import ForsettiTestSupport
import Foundation
import Testing

@testable import ForsettiBinary

/// The rule that turns where a module's libraries lie into the directories its worker may
/// read (`LibraryGrants.decide`): each refusal names the directory and why, and ordinary
/// library directories pass.
@Suite struct LibraryGrantsTests {
  static let state = "/var/lib/forsetti"
  static let exports = "/srv/forsetti-exports"

  /// A resolution that found `name` at each real path.
  static func resolution(_ libraries: [(name: String, realPath: String)]) -> LibraryResolver.Resolution {
    var r = LibraryResolver.Resolution()
    r.found = libraries.map {
      LibraryResolver.Found(
        name: $0.name, neededBy: "/opt/vendor/module.so", path: $0.realPath, realPath: $0.realPath,
        source: .runPath)
    }
    return r
  }

  /// The grants for one library at `realPath`, no directory writable by anyone unless `anyoneWrites` says so.
  static func decide(_ realPath: String, anyoneWrites: @escaping (String) -> Bool = { _ in false })
    -> LibraryGrants
  {
    LibraryGrants.decide(
      resolution([("libvendor.so.1", realPath)]), protected: [state, exports], anyoneWrites: anyoneWrites)
  }

  static func expectRefused(
    _ realPath: String, directory: String, because words: [String],
    anyoneWrites: @escaping (String) -> Bool = { _ in false },
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    let g = decide(realPath, anyoneWrites: anyoneWrites)
    #expect(g.granted.isEmpty, "\(realPath) granted \(g.granted)", sourceLocation: sourceLocation)
    #expect(g.refused.count == 1, sourceLocation: sourceLocation)
    guard let r = g.refused.first else { return }
    #expect(r.directory == directory, sourceLocation: sourceLocation)
    #expect(r.library == "libvendor.so.1", sourceLocation: sourceLocation)
    for w in words { #expect(r.reason.contains(w), "reason: \(r.reason)", sourceLocation: sourceLocation) }
    #expect(
      g.summary.contains("REFUSED \(directory) (libvendor.so.1)"), "\(g.summary)",
      sourceLocation: sourceLocation)
  }

  @Test func theRootDirectoryIsRefused() {
    Self.expectRefused("/libvendor.so.1", directory: "/", because: ["root directory"])
  }

  @Test(arguments: ["/proc", "/sys", "/dev", "/run"])
  func kernelFileSystemsAreRefused(_ tree: String) {
    Self.expectRefused("\(tree)/libvendor.so.1", directory: tree, because: ["inside \(tree)"])
    Self.expectRefused(
      "\(tree)/1/root/usr/lib/libvendor.so.1", directory: "\(tree)/1/root/usr/lib",
      because: ["inside \(tree)"])
  }

  @Test func aDirectoryThatMerelySharesAPrefixWithAKernelTreeIsGranted() {
    #expect(Self.decide("/procedures/lib/libvendor.so.1").granted == ["/procedures/lib"])
    #expect(Self.decide("/devtools/lib/libvendor.so.1").granted == ["/devtools/lib"])
  }

  @Test(arguments: [state, exports])
  func directoriesOverlappingWhereModulesWriteAreRefused(_ protected: String) {
    // Inside (a module's sandbox), at, and above (a grant would cover every sandbox).
    let inside = protected + "/sandboxes/com.example.evil"
    Self.expectRefused(
      inside + "/libvendor.so.1", directory: inside, because: ["overlaps \(protected)", "modules write"])
    Self.expectRefused(
      protected + "/libvendor.so.1", directory: protected, because: ["overlaps \(protected)"])
    let above = (protected as NSString).deletingLastPathComponent
    Self.expectRefused(above + "/libvendor.so.1", directory: above, because: ["overlaps \(protected)"])
    // A sibling whose name starts the same is no overlap.
    #expect(Self.decide(protected + "-vendor/libvendor.so.1").granted == [protected + "-vendor"])
  }

  @Test func aDirectoryAnyoneMayWriteIsRefused() throws {
    // Real directories and the real check: /tmp, and a vendor directory left 0777.
    Self.expectRefused(
      "/tmp/libvendor.so.1", directory: "/tmp", because: ["anyone may write"],
      anyoneWrites: LibraryGrants.anyoneWrites)
    let dir = TemporaryDirectory("grants")
    let open = dir.url("open")
    let closed = dir.url("closed")
    for (path, mode) in [(open, 0o777), (closed, 0o755)] {
      try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
      #expect(chmod(path, mode_t(mode)) == 0)
    }
    Self.expectRefused(
      open + "/libvendor.so.1", directory: open, because: ["anyone may write"],
      anyoneWrites: LibraryGrants.anyoneWrites)
    #expect(
      Self.decide(closed + "/libvendor.so.1", anyoneWrites: LibraryGrants.anyoneWrites).granted == [closed])
    #expect(LibraryGrants.anyoneWrites("/tmp"))
    #expect(!LibraryGrants.anyoneWrites("/usr/lib"))
  }

  @Test func systemLibraryDirectoriesAreGrantedEachOnce() throws {
    let libc = try #require(
      LibraryResolver.realPath("/lib/x86_64-linux-gnu/libc.so.6")
        ?? LibraryResolver.realPath("/lib/aarch64-linux-gnu/libc.so.6"))
    let libm = try #require(
      LibraryResolver.realPath(
        ((libc as NSString).deletingLastPathComponent as NSString).appendingPathComponent("libm.so.6")))
    let g = LibraryGrants.decide(
      Self.resolution([
        ("libc.so.6", libc), ("libm.so.6", libm), ("libvendor.so.1", "/opt/vendor/lib/libvendor.so.1"),
      ]),
      protected: [Self.state], anyoneWrites: LibraryGrants.anyoneWrites)
    #expect(g.granted == [(libc as NSString).deletingLastPathComponent, "/opt/vendor/lib"])
    #expect(g.refused.isEmpty)
    #expect(g.summary == "granted \(g.granted.joined(separator: ", "))")
  }

  @Test func missingLibrariesAreCarriedIntoTheSummary() {
    var r = Self.resolution([("libvendor.so.1", "/opt/vendor/lib/libvendor.so.1")])
    r.missing = [
      LibraryResolver.Missing(
        name: "libgone.so", neededBy: "/opt/vendor/module.so", searched: ["/opt/vendor/lib"]),
      LibraryResolver.Missing(
        name: "libbad.so", neededBy: "/opt/vendor/module.so", searched: ["/opt/vendor/lib"],
        unusable: "/opt/vendor/lib/libbad.so: invalid ELF header"),
    ]
    let g = LibraryGrants.decide(r, protected: [Self.state], anyoneWrites: { _ in false })
    #expect(g.missing == r.missing)
    #expect(g.summary.contains("not found: libgone.so (needed by /opt/vendor/module.so)"), "\(g.summary)")
    #expect(
      g.summary.contains(
        "libbad.so (needed by /opt/vendor/module.so; the loader stops at /opt/vendor/lib/libbad.so: invalid ELF header)"
      ), "\(g.summary)")
  }

  /// End to end with real parts: a module whose DT_RUNPATH points into a directory anyone may
  /// write, resolved as the host resolves it, is refused there; its system libraries are not.
  @Test func aRealModuleShippingLibrariesInAWorldWritableDirectoryIsRefused() throws {
    let dir = TemporaryDirectory("grants")
    let drop = dir.url("drop")
    try FileManager.default.createDirectory(atPath: drop, withIntermediateDirectories: true)
    #expect(chmod(drop, 0o777) == 0)
    try CFixture.sharedObject(
      "drop/libshared.so", source: "int shared_value(void) { return 1; }\n", in: dir,
      extraFlags: ["-Wl,-soname,libshared.so"])
    let so = try CFixture.sharedObject(
      "module.so", source: "int shared_value(void);\nint forsetti_entry(void) { return shared_value(); }\n",
      in: dir,
      extraFlags: ["-L" + drop, "-lshared", "-Wl,--no-as-needed", "-Wl,--enable-new-dtags,-rpath," + drop])
    let facts = try ELFInspector.inspect(so).get()
    let resolution = LibraryResolver(cache: LoaderCache.system()).resolve(facts, path: so)
    let g = LibraryGrants.decide(resolution, protected: [dir.url("state")])
    let realDrop = try #require(LibraryResolver.realPath(drop))
    #expect(g.refused.map(\.directory) == [realDrop])
    #expect(g.refused.first?.reason.contains("anyone may write") == true)
    #expect(!g.granted.contains(realDrop))
    #expect(!g.granted.isEmpty, "libc's directory is granted")
    // Positive control: the same directory closed to others is granted.
    #expect(chmod(drop, 0o755) == 0)
    #expect(LibraryGrants.decide(resolution, protected: [dir.url("state")]).granted.contains(realDrop))
  }
}
