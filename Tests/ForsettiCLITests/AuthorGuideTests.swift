import ForsettiTestSupport
import Foundation
import Testing

/// `docs/author-guide.md` as a reader uses it: its code builds, and its walkthrough runs.
///
/// The convention. A fenced block the test uses has, on the line directly before its opening
/// fence, an HTML comment (Markdown shows nothing for it):
///
///     <!-- test: KIND NAME [ARGUMENT] -->
///
/// - `c-file NAME`: a whole C file; built alone with `cc -Wall -Werror -shared -fPIC` against
///   `forsetti.h`.
/// - `c-functions NAME`: functions a reader adds to their module; built alone the same way, the
///   test adding one reference to each `static` function so an unused one is no error.
/// - `c-replace NAME FUNCTION`: the guide says "replace FUNCTION": its `#include`s go after the
///   module's own and its body replaces FUNCTION in the walkthrough's source, which is then
///   built the same way.
/// - `swift-file NAME`: type-checked (`swiftc -typecheck -swift-version 6`) against the built
///   `ForsettiSDK` module.
/// - `json-edit NAME`: one `"key": value,` manifest line, put in place of that key's line in the
///   walkthrough's manifest.
/// - `sh NAME`: commands the walkthrough runs as written, with bash, `HOME` a fresh directory
///   and the installation's `bin` first on `PATH`.
/// - `output NAME`: output the guide shows; each of its lines must be a line of what the
///   command really printed.
///
/// Every `c` and `swift` block must have a directive, so a new snippet cannot go unbuilt.
/// Blocks that run until Ctrl-C (`make run`, `make dev`) have none: the walkthrough runs their
/// commands itself, with `--for` or stopping the host, and checks what the guide says they show.
@Suite(.onTestThreads, .serialized) struct AuthorGuideTests {
  static let guidePath = HostBinary.packageRoot + "/docs/author-guide.md"
  static let include = HostBinary.packageRoot + "/Sources/CForsetti/include"

  let dir = TemporaryDirectory("author-guide")

  static func blocks() throws -> [GuideBlock] {
    try GuideSnippets.parse(String(contentsOfFile: guidePath, encoding: .utf8))
  }

  /// The block of `kind` named `name`; fails the test naming what is missing.
  static func block(_ kind: String, _ name: String, in blocks: [GuideBlock]) throws -> GuideBlock {
    try #require(
      blocks.first { $0.kind == kind && $0.name == name },
      "docs/author-guide.md has no block marked <!-- test: \(kind) \(name) -->")
  }

  /// Compiles C `source` as the guide's readers do, warnings as errors; the compiler's output
  /// on failure, prefixed by the guide's line.
  func compile(_ source: String, as name: String, for block: GuideBlock) throws {
    let src = try dir.write("snippets/\(name).c", source)
    let r = try ProcessRunner.run(
      "/usr/bin/env",
      [
        "cc", "-std=c11", "-Wall", "-Werror", "-shared", "-fPIC", "-I", Self.include, "-o",
        dir.url("snippets/lib\(name).so"), src,
      ])
    #expect(r.status == 0, "\(block.location) does not build:\n\(guideLines(r.stderr, file: src, block))")
  }

  /// The compiler's `FILE:N:` turned into the guide's own line, for a block written out as it is
  /// (`c-replace` files are the reader's whole source, so their lines stay the file's).
  func guideLines(_ diagnostics: String, file: String, _ block: GuideBlock) -> String {
    guard block.kind != "c-replace" else { return diagnostics }
    var out = ""
    for line in diagnostics.split(separator: "\n", omittingEmptySubsequences: false) {
      var l = String(line)
      if l.hasPrefix(file + ":"), let n = Int(l.dropFirst(file.count + 1).prefix { $0.isNumber }) {
        l = "docs/author-guide.md:\(block.line + n):" + l.dropFirst(file.count + 1 + String(n).count + 1)
      }
      out += l + "\n"
    }
    return out
  }

  @Test func everyCAndSwiftBlockIsMarkedAndEveryCBlockBuilds() throws {
    let blocks = try Self.blocks()
    for b in blocks where ["c", "swift"].contains(b.language) {
      #expect(b.kind != nil, "docs/author-guide.md:\(b.line): a \(b.language) block without <!-- test: … -->")
    }
    let files = blocks.filter { $0.kind == "c-file" || $0.kind == "c-functions" }
    #expect(files.count >= 6, "fewer C blocks than the guide has: \(files.map(\.location))")
    for (n, b) in files.enumerated() {
      var source = b.text
      if b.kind == "c-functions" {
        let names = GuideSnippets.staticFunctions(in: source)
        #expect(!names.isEmpty, "\(b.location): no static function found")
        source +=
          "void *const guide_keep_\(n)[] = {\(names.map { "(void *)\($0)" }.joined(separator: ", "))};\n"
      }
      try compile(source, as: "\(b.name ?? "block")-\(n)", for: b)
    }
  }

  @Test func swiftBlocksTypeCheckAgainstTheSDK() throws {
    let blocks = try Self.blocks().filter { $0.kind == "swift-file" }
    #expect(!blocks.isEmpty, "no <!-- test: swift-file … --> block")
    let bin = (HostBinary.path as NSString).deletingLastPathComponent
    for b in blocks {
      let src = try dir.write("swift/\(b.name ?? "block").swift", b.text)
      let r = try ProcessRunner.run(
        "/usr/bin/env",
        [
          "swiftc", "-typecheck", "-swift-version", "6", "-parse-as-library", "-I", bin + "/Modules",
          "-Xcc", "-fmodule-map-file=\(bin)/CForsetti.build/module.modulemap", "-Xcc", "-I", "-Xcc",
          Self.include, src,
        ])
      #expect(
        r.status == 0,
        "\(b.location) does not type-check against ForsettiSDK:\n\(guideLines(r.stderr, file: src, b))")
    }
  }
}

/// The guide's walkthrough, run for real with the host built for these tests, installed the way
/// section 1 says: from nothing to a signed, licensed, running module.
///
/// TRUST ROLES: the steps marked `trust-roles` use `forsetti-host trust FILE.pub --for
/// licences|modules` and `--require-signatures` (the design of issue 19's trust roles); they fail
/// on a host without those.
extension AuthorGuideTests {
  /// One reader's machine: a fresh `HOME`, Forsetti installed in `~/forsetti`, on `PATH`.
  struct Reader {
    let home: String
    var prefix: String { home + "/forsetti" }
    var project: String { home + "/weather" }
    var environment: [String] {
      [
        "HOME=\(home)",
        // The host's default state directory, in the reader's home even as root (created below).
        "XDG_STATE_HOME=\(home)/.local/state",
        "PATH=\(prefix)/bin:\(ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")",
      ]
    }

    /// Runs `script` with bash in `directory` (the project by default), stopping at the first
    /// failing command.
    func shell(_ script: String, in directory: String? = nil) throws -> ProcessResult {
      try ProcessRunner.run(
        "/usr/bin/env", environment + ["bash", "-e", "-o", "pipefail", "-c", script], in: directory ?? project
      )
    }

    /// The installed `forsetti-host` with `arguments`, in the project.
    func host(_ arguments: [String]) throws -> ProcessResult {
      try ProcessRunner.run(
        "/usr/bin/env", environment + [prefix + "/bin/forsetti-host"] + arguments, in: project)
    }

    /// `make run` as the guide shows it, stopped after `seconds` instead of by Ctrl-C.
    func run(_ extra: [String] = [], seconds: String = "1") throws -> String {
      let r = try host(["run", "--manifests", "manifests", "--plugins", "build", "--for", seconds] + extra)
      return r.stdout + r.stderr
    }

    var source: String { project + "/src/weather.c" }
    var manifest: String { project + "/manifests/weather.json" }
  }

  /// Runs the `sh NAME` block and requires it to succeed.
  @discardableResult
  func step(_ name: String, _ blocks: [GuideBlock], _ reader: Reader, in directory: String? = nil) throws
    -> ProcessResult
  {
    let b = try Self.block("sh", name, in: blocks)
    let r = try reader.shell(b.text, in: directory)
    try #require(r.status == 0, "\(b.location) failed (exit \(r.status)):\n\(b.text)\(r.stdout)\(r.stderr)")
    return r
  }

  /// Every line of the `output NAME` block is a line of `actual`.
  func expectOutput(_ name: String, _ blocks: [GuideBlock], in actual: String) throws {
    let b = try Self.block("output", name, in: blocks)
    let real = Set(actual.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
    for line in b.text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).isEmpty {
      #expect(
        real.contains(line.trimmingCharacters(in: .whitespaces)),
        "\(b.location) shows `\(line)`, which the command did not print:\n\(actual)")
    }
  }

  func edit(_ path: String, _ change: (String) -> String?, _ what: String) throws {
    let text = try String(contentsOfFile: path, encoding: .utf8)
    let changed = try #require(change(text), "\(what): could not apply it to \(path):\n\(text)")
    try changed.write(toFile: path, atomically: true, encoding: .utf8)
  }

  func make(_ reader: Reader, _ why: String) throws {
    let r = try reader.shell("make")
    try #require(r.status == 0, "make failed after \(why):\n\(r.stdout)\(r.stderr)")
  }

  @Test func theWalkthroughRunsFromNothingToASignedLicensedRunningModule() throws {
    let blocks = try Self.blocks()
    let reader = Reader(home: dir.url("home"))
    // The reader's own XDG state directory, so that even as root the default state is theirs.
    try FileManager.default.createDirectory(
      atPath: reader.home + "/.local/state", withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: reader.home, withIntermediateDirectories: true)

    // 1. Install: scripts/install, from the binaries these tests run (a release build takes minutes).
    let bin = (HostBinary.path as NSString).deletingLastPathComponent
    let installed = try ProcessRunner.run(
      "/usr/bin/env",
      ["bash", HostBinary.packageRoot + "/scripts/install", "--prefix", reader.prefix, "--bin-dir", bin])
    try #require(installed.status == 0, "scripts/install failed: \(installed.stderr)")

    // 2. Make a project.
    let made = try step("new", blocks, reader, in: reader.home)
    try expectOutput("new", blocks, in: made.stdout)

    // 3. Build and run it.
    try make(reader, "forsetti-host new")
    let first = try reader.run()
    #expect(
      first.contains("hello from com.acme.weather") && first.contains("started com.acme.weather 0.1.0"),
      "\(first)")

    // 4. Live reload, the counter keeping its count: restore_state comes after start.
    let counter = try Self.block("c-file", "counter", in: blocks)
    try counter.text.write(toFile: reader.source, atomically: true, encoding: .utf8)
    try make(reader, "\(counter.location)")
    let dev = try DevHost(
      reader.environment + [
        reader.prefix + "/bin/forsetti-host", "dev", "--manifests", "manifests", "--plugins", "build",
      ],
      verb: nil, executable: "/usr/bin/env", in: reader.project)
    defer { dev.stop() }
    var seen = try #require(dev.await("started com.acme.weather"), "dev did not start it: \(dev.lines)").0
    for n in 1...2 {
      // The reader's edit: any change to the source makes a new binary.
      try edit(
        reader.source, { $0.replacingOccurrences(of: "\"hello ", with: "\"hello (edit \(n)) ") }, "an edit")
      try make(reader, "edit \(n)")
      let line = dev.await("weather reload number", from: seen + 1)
      #expect(
        line?.1.hasSuffix("weather reload number \(n)") == true,
        "\(counter.location): after reload \(n) the counter says \(line?.1 ?? "nothing"), not \(n): its count was not carried:\n\(dev.lines.joined(separator: "\n"))"
      )
      seen = line?.0 ?? seen
    }
    #expect(
      dev.lines.contains {
        $0.contains("reload com.acme.weather 0.1.0 → 0.1.0: reloaded, 1 bytes of state carried")
      }, "\(dev.lines)")
    dev.stop()

    // 5. A host service: module_start replaced, as the guide says; built with warnings as errors.
    let storage = try Self.block("c-replace", "storage", in: blocks)
    try edit(
      reader.source, { GuideSnippets.replacing(storage.argument ?? "", in: $0, with: storage.text) },
      storage.location)
    try compile(
      try String(contentsOfFile: reader.source, encoding: .utf8), as: "weather-storage", for: storage)
    try make(reader, storage.location)
    // 6. lint, before the capability is requested.
    let lint = try reader.shell(try Self.block("sh", "lint", in: blocks).text)
    try expectOutput("lint-before", blocks, in: lint.stdout + lint.stderr)
    let capability = try Self.block("json-edit", "storage", in: blocks)
    try edit(reader.manifest, { GuideSnippets.editing($0, with: capability.text) }, capability.location)
    let pending = try reader.run()
    #expect(pending.contains("approvalPending"), "\(pending)")
    try step("approve", blocks, reader)
    for n in 1...2 {
      let out = try reader.run()
      #expect(out.contains("weather run number \(n)"), "\(storage.location): run \(n):\n\(out)")
    }
    let clean = try reader.shell(try Self.block("sh", "lint", in: blocks).text)
    #expect(
      clean.status == 0 && clean.stdout.contains("0 errors, 0 warnings"), "\(clean.stdout)\(clean.stderr)")

    // 7. Sign it.
    try step("sign", blocks, reader)
    #expect(FileManager.default.fileExists(atPath: reader.project + "/build/libweather.so.sig"))
    // trust-roles: `trust --for modules`, then verify.
    let verified = try step("verify", blocks, reader)
    #expect(verified.stdout.contains("signed by trusted key"), "\(verified.stdout)")

    // 8. A paid module: locked without a licence, running with one.
    let product = try Self.block("json-edit", "product", in: blocks)
    try edit(reader.manifest, { GuideSnippets.editing($0, with: product.text) }, product.location)
    let locked = try reader.run()
    #expect(locked.contains("moduleLocked"), "\(product.location):\n\(locked)")
    try step("licence", blocks, reader)
    // trust-roles: the customer's host, keys trusted for licences and modules, signatures required.
    let customer = try step("customer", blocks, reader)
    let ran = customer.stdout + customer.stderr
    #expect(ran.contains("started com.acme.weather 0.1.0"), "signed, licensed, running?\n\(ran)")

    // 7 again: a rebuild after signing is refused by a host that trusts the key.
    try edit(
      reader.source, { $0 + "static const char rebuilt[] __attribute__((used)) = \"after signing\";\n" },
      "an edit")
    try make(reader, "an edit after signing")
    let stale = try reader.run(["--state", reader.home + "/acme-customer", "--require-signatures"])
    #expect(stale.contains("signatureInvalid"), "\(stale)")
  }
}
