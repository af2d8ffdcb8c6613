import Foundation

/// The bundled example modules, built as scripts/build-plugins builds them: the Swift ones
/// SwiftPM built beside the host, and the C ones compiled here.
public enum ExampleModules {
  /// The example modules' IDs, one per manifest in `manifests/`.
  public static let moduleIDs = [
    "com.example.asktheapp", "com.example.counter", "com.example.dashboard", "com.example.helloc",
    "com.example.journal", "com.example.notes", "com.example.shared-database", "com.example.toolbox",
  ]

  /// The Swift examples' libraries, as SwiftPM names them beside the host.
  static let swiftLibraries = ["libCounterModule.so", "libDashboardModule.so", "libToolboxModule.so"]

  /// The C examples: source (from the package root), library name, extra compiler arguments.
  static let cModules: [(source: String, library: String, flags: [String])] = [
    ("Plugins/HelloC/hello.c", "libhelloc.so", []),
    ("Plugins/AskTheApp/ask.c", "libasktheapp.so", []),
    ("Plugins/SharedDatabase/shared_database.c", "libshared_database.so", ["-lsqlite3"]),
    ("Plugins/Notes/notes.c", "libnotes.so", ["-I", root("Plugins/SharedDatabase"), "-lpthread"]),
    ("Plugins/Journal/journal.c", "libjournal.so", ["-I", root("Plugins/SharedDatabase"), "-lpthread"]),
  ]

  /// The shared database example alone: the provider and its two consumers.
  public static let sharedDatabaseManifests = ["shared-database.json", "notes.json", "journal.json"]

  /// Puts every example in `dir/plugins`; returns that directory.
  public static func install(in dir: TemporaryDirectory) throws -> String {
    let plugins = dir.url("plugins")
    try FileManager.default.createDirectory(atPath: plugins, withIntermediateDirectories: true)
    let bin = (HostBinary.path as NSString).deletingLastPathComponent
    for lib in swiftLibraries {
      try FileManager.default.copyItem(
        atPath: (bin as NSString).appendingPathComponent(lib), toPath: plugins + "/" + lib)
    }
    for m in cModules { try compile(m, into: plugins) }
    return plugins
  }

  /// Puts the Swift Toolbox example with the shared database example it calls (provider, Notes,
  /// Journal) in `dir/plugins` and their manifests in `dir/manifests`.
  public static func installToolbox(in dir: TemporaryDirectory) throws {
    try installSharedDatabase(in: dir)
    let bin = (HostBinary.path as NSString).deletingLastPathComponent
    try FileManager.default.copyItem(
      atPath: (bin as NSString).appendingPathComponent("libToolboxModule.so"),
      toPath: dir.url("plugins/libToolboxModule.so"))
    try dir.write(
      "manifests/toolbox.json", String(contentsOfFile: root("manifests/toolbox.json"), encoding: .utf8))
  }

  /// Puts the shared database example (provider, Notes, Journal) in `dir/plugins` and its
  /// manifests in `dir/manifests`, so a test can add modules of its own beside it.
  public static func installSharedDatabase(in dir: TemporaryDirectory) throws {
    let plugins = dir.url("plugins")
    try FileManager.default.createDirectory(atPath: plugins, withIntermediateDirectories: true)
    for m in cModules where !["libhelloc.so", "libasktheapp.so"].contains(m.library) {
      try compile(m, into: plugins)
    }
    for name in sharedDatabaseManifests {
      try dir.write("manifests/" + name, String(contentsOfFile: root("manifests/" + name), encoding: .utf8))
    }
  }

  /// Puts the AskTheApp example in `dir/plugins` and its manifest in `dir/manifests`; with
  /// `product`, its manifest names that paid product (`iapProductID`).
  public static func installAskTheApp(in dir: TemporaryDirectory, product: String? = nil) throws {
    let plugins = dir.url("plugins")
    try FileManager.default.createDirectory(atPath: plugins, withIntermediateDirectories: true)
    for m in cModules where m.library == "libasktheapp.so" { try compile(m, into: plugins) }
    var manifest = try String(contentsOfFile: root("manifests/ask-the-app.json"), encoding: .utf8)
    if let product {
      manifest = manifest.replacingOccurrences(
        of: #""entryPoint""#, with: #""iapProductID": "\#(product)", "entryPoint""#)
    }
    try dir.write("manifests/ask-the-app.json", manifest)
  }

  private static func compile(_ m: (source: String, library: String, flags: [String]), into plugins: String)
    throws
  {
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "cc", "-shared", "-fPIC", "-I", ModuleFixture.includeDirectory, "-o", plugins + "/" + m.library,
        root(m.source),
      ]
        + m.flags)
    guard r.status == 0 else { throw CFixture.BuildError(output: r.stderr) }
  }

  /// `relative` inside the package.
  public static func root(_ relative: String) -> String {
    (HostBinary.packageRoot as NSString).appendingPathComponent(relative)
  }
}
