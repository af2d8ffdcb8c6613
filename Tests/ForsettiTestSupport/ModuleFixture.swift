import Foundation

/// C source for a real module compiled against forsetti.h, with hooks for what `start` and
/// `stop` do. Hostile fixtures are made by passing hostile bodies.
public struct ModuleFixture {
  public var moduleID: String
  public var type: String = "service"
  public var version: (Int, Int, Int) = (1, 0, 0)
  public var entryPoint: String
  /// C statements inside `start(void *self, const forsetti_host *host)`; `g_host` is set.
  public var start: String = "return FORSETTI_OK;"
  /// C statements inside `stop(void *self)`.
  public var stop: String = ""
  /// Extra C at file scope (helpers, constructors, UI tables).
  public var prelude: String = ""
  /// Expression for the table's `ui_contributions` field.
  public var uiContributions: String = "NULL"
  /// Expression for the table's `abi_version` field.
  public var abiVersion: String = "FORSETTI_ABI_VERSION"
  /// Expression for the table's `struct_size` field.
  public var tableSize: String = "sizeof(forsetti_module)"
  /// Body of the entry point.
  public var entryBody: String = "return &module;"
  /// The module ID the descriptor reports (defaults to `moduleID`).
  public var descriptorID: String?
  /// Extra designated initialisers for the module table, e.g. `.save_state = f,`.
  public var tableExtra: String = ""

  public init(moduleID: String, entryPoint: String) {
    self.moduleID = moduleID
    self.entryPoint = entryPoint
  }

  /// The include directory of forsetti.h in this package.
  public static var includeDirectory: String {
    (HostBinary.packageRoot as NSString).appendingPathComponent("Sources/CForsetti/include")
  }

  public var source: String {
    """
    #include <forsetti.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include <unistd.h>
    #include <fcntl.h>

    static const forsetti_host *g_host;
    static void fixture_log(const char *m) { if (g_host) g_host->log(FORSETTI_LOG_INFO, m); }
    \(prelude)

    static forsetti_status fixture_start(void *self, const forsetti_host *host) {
      (void)self;
      g_host = host;
      \(start)
    }

    static void fixture_stop(void *self) {
      (void)self;
      \(stop)
    }

    static const forsetti_module_descriptor descriptor = {
      .struct_size = sizeof(forsetti_module_descriptor),
      .module_id = "\(descriptorID ?? moduleID)",
      .module_type = "\(type)",
      .version_major = \(version.0), .version_minor = \(version.1), .version_patch = \(version.2),
      .version_prerelease = NULL,
    };

    static const struct forsetti_ui_contributions *fixture_ui(void *self) { (void)self; return \(uiContributions); }

    static const forsetti_module module = {
      .abi_version = \(abiVersion),
      .struct_size = \(tableSize),
      .descriptor = &descriptor,
      .self = NULL,
      .start = fixture_start,
      .stop = fixture_stop,
      .ui_contributions = fixture_ui,
      \(tableExtra)
    };

    const forsetti_module *\(entryPoint)(uint32_t host_abi) {
      (void)host_abi;
      \(entryBody)
    }
    """
  }

  /// A manifest agreeing with the fixture.
  public func manifest(capabilities: [String] = [], extra: String = "") -> String {
    let caps = capabilities.map { "\"\($0)\"" }.joined(separator: ",")
    return """
      {"schemaVersion":"1.0","moduleID":"\(moduleID)","displayName":"\(moduleID)",
       "moduleVersion":{"major":\(version.0),"minor":\(version.1),"patch":\(version.2)},"moduleType":"\(type)",
       "supportedPlatforms":["linux"],"minForsettiVersion":{"major":0,"minor":1,"patch":0},
       "capabilitiesRequested":[\(caps)],"entryPoint":"\(entryPoint)"\(extra)}
      """
  }

  /// Compiles the fixture into `plugins/<name>.so` of `dir`, writes its manifest into
  /// `manifests/<name>.json`, and returns the .so path.
  @discardableResult
  public func install(
    in dir: TemporaryDirectory, name: String? = nil, capabilities: [String] = [], manifestExtra: String = "",
    ccFlags: [String] = []
  ) throws -> String {
    let base = name ?? entryPoint
    try dir.write("manifests/\(base).json", manifest(capabilities: capabilities, extra: manifestExtra))
    return try build(in: dir, as: "plugins/\(base).so", ccFlags: ccFlags)
  }

  /// Compiles the fixture to `relative` inside `dir`.
  @discardableResult
  public func build(in dir: TemporaryDirectory, as relative: String, ccFlags: [String] = []) throws -> String
  {
    let src = try dir.write("src/\(UUID().uuidString).c", source)
    let out = dir.url(relative)
    try FileManager.default.createDirectory(
      atPath: (out as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      ["cc", "-shared", "-fPIC", "-Wall", "-I", Self.includeDirectory, "-o", out, src] + ccFlags)
    guard r.status == 0 else { throw CFixture.BuildError(output: r.stderr + "\n" + source) }
    return out
  }
}
