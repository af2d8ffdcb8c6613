import ForsettiCore

/// The files of a new module project, as values: `forsetti-host new` writes them. A C project
/// builds with `make` against `forsetti.pc`; a Swift one with `swift build` against the Swift
/// SDK. Both find them in the installation `prefix` (`scripts/install --prefix`).
struct ModuleTemplate {
  enum Language: String, CaseIterable { case c, swift }

  var language: Language
  var moduleID: String
  var type: ModuleType
  /// The installation whose `lib/pkgconfig/forsetti.pc`, `share/forsetti/ForsettiSDK` and
  /// `bin/forsetti-host` the project uses.
  var prefix: String

  /// Where the built `.so` lands, relative to the project: the `--plugins` directory.
  var pluginsDirectory: String { language == .c ? "build" : ".build/debug" }

  /// The last part of the ID, as written: `com.vendor.thing` → `thing`.
  var shortName: String { moduleID.split(separator: ".").last.map(String.init) ?? moduleID }

  /// The exported C symbol: the whole ID as an identifier, so two vendors' modules never clash.
  var entryPoint: String {
    String(moduleID.map { $0.isLetter || $0.isNumber ? $0 : "_" }) + "_entry"
  }

  /// `thing` → `Thing`, `my-thing` → `MyThing`: the Swift class (and, with `Module`, the
  /// product). A name the SDK already uses (`Host`, `Storage` …) gets `Module` appended.
  var typeName: String {
    let name = shortName.split(whereSeparator: { !$0.isLetter && !$0.isNumber })
      .map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    return Self.sdkNames.contains(name) ? name + "Module" : name
  }

  static let sdkNames: Set<String> = [
    "Crypto", "Delivery", "Diagnostics", "Events", "FileExport", "Forsetti", "ForsettiError",
    "ForsettiModule", "ForsettiSDK", "Health", "Host", "Kind", "Level", "Messages", "Mode",
    "ModuleIdentity", "OpenOptions", "Role", "RoleCall", "RoleService", "SecureStorage", "Storage",
    "Telemetry", "ToolbarItem", "UIContributionSet", "View",
  ]

  /// The C library's base name: `thing` → `libthing.so`; hyphens become underscores.
  var cName: String { String(shortName.map { $0.isLetter || $0.isNumber ? $0 : "_" }) }

  var manifestPath: String { "manifests/\(shortName).json" }

  /// The built binary, relative to the project.
  var binaryPath: String {
    language == .c ? "build/lib\(cName).so" : ".build/debug/lib\(typeName)Module.so"
  }

  /// Relative path → content.
  var files: [(path: String, content: String)] {
    var out = [(manifestPath, manifest), ("README.md", readme), (".gitignore", gitignore)]
    switch language {
    case .c:
      out += [("Makefile", makefile), ("src/\(cName).c", cSource)]
    case .swift:
      out += [("Package.swift", packageSwift), ("Sources/\(typeName)Module/\(typeName).swift", swiftSource)]
    }
    return out
  }

  var manifest: String {
    JSONWriter.string(
      .object(
        JSONObject([
          ("schemaVersion", "1.0"), ("moduleID", .string(moduleID)), ("displayName", .string(typeName)),
          ("moduleVersion", Self.version(0, 1, 0)), ("moduleType", .string(type.rawValue)),
          ("supportedPlatforms", ["linux"]),
          (
            "minForsettiVersion",
            Self.version(ForsettiVersion.current.major, ForsettiVersion.current.minor, 0)
          ),
          ("maxForsettiVersion", .null), ("capabilitiesRequested", []), ("iapProductID", .null),
          ("entryPoint", .string(entryPoint)),
        ])), pretty: true) + "\n"
  }

  static func version(_ major: Int, _ minor: Int, _ patch: Int) -> JSONValue {
    .object(
      JSONObject([
        ("major", .number(String(major))), ("minor", .number(String(minor))),
        ("patch", .number(String(patch))),
      ]))
  }

  var host: String { "\(prefix)/bin/forsetti-host" }

  var runCommands: String {
    language == .c
      ? "make dev        # build, then run under forsetti-host dev: rebuilds are picked up live"
      : "swift build && \(host) dev --manifests manifests --plugins \(pluginsDirectory)"
  }

  var readme: String {
    let build = language == .c ? "make" : "swift build"
    return """
      # \(typeName)

      A Forsetti \(type.rawValue) module (`\(moduleID)`), made by `forsetti-host new`.

      ```sh
      \(build)            # builds \(binaryPath)
      \(runCommands)
      ```

      - `\(manifestPath)` is the manifest: who the module is and what it asks for. Its
        `entryPoint` (`\(entryPoint)`) is the C symbol the binary exports.
      - To use a host service, add its capability to `capabilitiesRequested` (e.g. `"storage"`),
        then resolve it in `start`; the host asks the user to approve it on the first run.
      - `\(host) lint \(manifestPath) --plugin \(binaryPath)` runs the review checklist.
      - To ship it signed: make a key pair once, outside this project
        (`forsetti-host keygen ~/keys/vendor`), then
        `forsetti-host sign \(binaryPath) --key ~/keys/vendor.key`, and send the `.so`, its `.sig` and the
        manifest.

      The Forsetti installation used is `\(prefix)`\(language == .c ? " (`make FORSETTI_PREFIX=…` to change it)" : "").
      The author's guide and the ABI and manifest references are in `\(prefix)/share/doc/forsetti`.

      """
  }

  var gitignore: String {
    // Secret signing keys never belong in a repository, wherever `keygen` was pointed.
    language == .c ? "/build/\n/.forsetti/\n*.key\n" : "/.build/\n/.forsetti/\n/Package.resolved\n*.key\n"
  }

  var makefile: String {
    """
    # Builds \(binaryPath) against the Forsetti installation in FORSETTI_PREFIX (forsetti.pc).
    FORSETTI_PREFIX ?= \(prefix)
    PKG_CONFIG := PKG_CONFIG_PATH=$(FORSETTI_PREFIX)/lib/pkgconfig pkg-config
    FORSETTI_HOST ?= $(FORSETTI_PREFIX)/bin/forsetti-host

    ifneq ($(shell $(PKG_CONFIG) --exists forsetti && echo yes),yes)
    $(error forsetti.pc not found in $(FORSETTI_PREFIX)/lib/pkgconfig: install Forsetti with scripts/install --prefix DIR, then make FORSETTI_PREFIX=DIR)
    endif

    CFLAGS ?= -O2 -g
    CFLAGS += -std=c11 -fPIC -fvisibility=hidden -Wall -Wextra $(shell $(PKG_CONFIG) --cflags forsetti)
    LIB := \(binaryPath)

    all: $(LIB)

    # Written to a hidden temporary name (the host skips dot files) and renamed into place, so a
    # running `dev` host never sees a half-written library.
    $(LIB): src/\(cName).c
    \tmkdir -p build
    \t$(CC) $(CFLAGS) -shared -o $(@D)/.$(@F).tmp $< $(shell $(PKG_CONFIG) --libs forsetti)
    \tmv $(@D)/.$(@F).tmp $@

    lint: $(LIB)
    \t$(FORSETTI_HOST) lint \(manifestPath) --plugin $(LIB)

    run: $(LIB)
    \t$(FORSETTI_HOST) run --manifests manifests --plugins build

    dev: $(LIB)
    \t$(FORSETTI_HOST) dev --manifests manifests --plugins build

    clean:
    \trm -rf build

    .PHONY: all lint run dev clean

    """
  }

  var cSource: String {
    """
    /* \(moduleID): a Forsetti \(type.rawValue) module in C.
     *
     * The host calls \(entryPoint) (the manifest's entryPoint) to get the module table, checks it
     * against the manifest, then calls start and, when it stops, stop. Host functions are bound
     * to this module: there is no module ID to pass, and after stop they are revoked. */
    #include <forsetti.h>

    static const forsetti_host *g_host;

    static forsetti_status module_start(void *self, const forsetti_host *host) {
      (void)self;
      g_host = host;
      host->log(FORSETTI_LOG_INFO, "hello from \(moduleID)");
      return FORSETTI_OK;
    }

    static void module_stop(void *self) {
      (void)self;
      g_host->log(FORSETTI_LOG_INFO, "goodbye from \(moduleID)");
    }

    /* Must agree with the manifest: moduleID, moduleType and moduleVersion. */
    static const forsetti_module_descriptor descriptor = {
        .struct_size = sizeof(forsetti_module_descriptor),
        .module_id = "\(moduleID)",
        .module_type = "\(type.rawValue)",
        .version_major = 0,
        .version_minor = 1,
        .version_patch = 0,
        .version_prerelease = NULL,
    };

    static const forsetti_module module = {
        .abi_version = FORSETTI_ABI_VERSION,
        .struct_size = sizeof(forsetti_module),
        .descriptor = &descriptor,
        .self = NULL,
        .start = module_start,
        .stop = module_stop,
        .ui_contributions = NULL,
        .save_state = NULL,
        .restore_state = NULL,
    };

    __attribute__((visibility("default"))) const forsetti_module *\(entryPoint)(uint32_t host_abi_version) {
      if (FORSETTI_ABI_VERSION_MAJOR_OF(host_abi_version) != FORSETTI_ABI_MAJOR) return NULL;
      return &module;
    }

    """
  }

  var packageSwift: String {
    """
    // swift-tools-version:6.0
    import PackageDescription

    // \(moduleID): `swift build` makes \(binaryPath). The Forsetti Swift SDK comes from the
    // installation in \(prefix) (scripts/install --prefix).
    let package = Package(
      name: "\(typeName)Module",
      products: [.library(name: "\(typeName)Module", type: .dynamic, targets: ["\(typeName)Module"])],
      dependencies: [.package(path: "\(prefix)/share/forsetti/ForsettiSDK")],
      targets: [
        .target(name: "\(typeName)Module", dependencies: [.product(name: "ForsettiSDK", package: "ForsettiSDK")])
      ]
    )

    """
  }

  var swiftSource: String {
    """
    import ForsettiSDK

    /// \(moduleID): a Forsetti \(type.rawValue) module. The host creates it, checks `identity`
    /// against the manifest, then calls `start` and, when it stops, `stop`.
    final class \(typeName): ForsettiModule {
      static let identity = ModuleIdentity("\(moduleID)", kind: .\(type.rawValue), version: (0, 1, 0))

      required init() {}

      func start(_ host: Host) throws(ForsettiError) {
        host.log("hello from \(moduleID)")
      }

      func stop() {}
    }

    /// The entry point the manifest names: the C symbol the host looks up.
    @_cdecl("\(entryPoint)") public func moduleEntry(_ abi: UInt32) -> UnsafeRawPointer? {
      Forsetti.export(\(typeName).self, hostABI: abi)
    }

    """
  }
}
