import ForsettiCore
import ForsettiTestSupport
import Foundation
import Testing

/// Issue 40, second finding: a manifest whose fields hold ESC, C1 controls, the separators, bidi
/// overrides and CR LF with a forged line reached the terminal raw through `check`, `list`,
/// `explain` and `run`'s table (the title set, the screen cleared, a forged row printed). Every
/// text field of a hostile manifest, and a hostile file name, now go through `check` (text,
/// trace, JSON), `explain` (text, JSON), `list` (text, JSON) and `lint`: no character of the
/// module-text rule appears raw (LF only as the tools' own line ends), and each place shows the
/// forged text escaped — the positive control that the field was shown at all.
@Suite(.onTestThreads) struct ManifestTextTests {
  let dir = TemporaryDirectory("manifest-text")

  /// A valid manifest of `id`, with `field` set to `value` (a JSON value written as text).
  static func manifest(id: String, _ field: String, _ value: String) -> String {
    var members: [String: String] = [
      "schemaVersion": "\"1.1\"", "manifestTemplateVersion": "\"1.1\"", "moduleID": "\"\(id)\"",
      "displayName": "\"Plain\"", "moduleVersion": #"{"major":1,"minor":0,"patch":0}"#,
      "moduleType": "\"service\"", "supportedPlatforms": #"["linux"]"#,
      "minForsettiVersion": #"{"major":0,"minor":1,"patch":0}"#, "capabilitiesRequested": #"["storage"]"#,
      "entryPoint": "\"plain_entry\"",
      "runtimeRequirements":
        #"{"io":[{"requirementID":"store","kind":"storage","access":"read_write","required":true,"description":"Plain."}],"dataIsolation":{"mode":"private_to_module","ownedStoreIDs":[],"requiredDefaultRoles":[]}}"#,
    ]
    if field == "description" {
      members["runtimeRequirements"] = members["runtimeRequirements"]?.replacingOccurrences(
        of: "\"Plain.\"", with: value)
    } else {
      members[field] = value
    }
    return "{" + members.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ") + "}"
  }

  /// The hostile text as a JSON string: control characters as JSON escapes, the rest raw UTF-8.
  static var hostileJSON: String {
    var out = "\""
    for u in HostileText.text.unicodeScalars {
      if u.value < 0x20 || u == "\"" || u == "\\" {
        out +=
          "\\u" + String(repeating: "0", count: 4 - String(u.value, radix: 16).count)
          + String(u.value, radix: 16)
      } else {
        out.unicodeScalars.append(u)
      }
    }
    return out + "\""
  }

  @Test func everyFieldAndAFileNameAreShownEscapedByEveryVerb() throws {
    let manifests = dir.url("manifests")
    let hostile = Self.hostileJSON
    var files: [String: String] = [:]
    for (i, field) in ["moduleID", "displayName", "moduleType", "entryPoint", "description"].enumerated() {
      let id = field == "moduleID" ? "" : "com.test.text\(i)"
      var text = Self.manifest(id: id, field, hostile)
      if field == "moduleID" {
        text = text.replacingOccurrences(of: "\"moduleID\": \"\"", with: "\"moduleID\": \(hostile)")
      }
      files[field] = try dir.write("manifests/\(field).json", text)
    }
    // The vendor names the file: ESC, a CSI and a line break in it.
    let named = "named\u{1b}[2J\u{9b}1m\r\nstarted com.test.forged.json"
    files["file name"] = try dir.write(
      "manifests/\(named)", Self.manifest(id: "com.test.named", "displayName", "\"N\""))
    let state = dir.url("state")
    try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)

    var seen: [(String, ProcessResult)] = []
    func ask(_ args: [String]) throws {
      seen.append((args.joined(separator: " "), try HostBinary.run(args, in: dir.path)))
    }
    try ask(["check", "--manifests", manifests, "--state", state])
    try ask(["check", "--manifests", manifests, "--state", state, "--trace"])
    try ask(["check", "--manifests", manifests, "--state", state, "--json"])
    for i in 1...4 {
      try ask(["explain", "com.test.text\(i)", "--manifests", manifests, "--state", state])
      try ask(["explain", "com.test.text\(i)", "--manifests", manifests, "--state", state, "--json"])
    }
    try ask(["list", "--manifests", manifests, "--state", state])
    try ask(["list", "--manifests", manifests, "--state", state, "--json"])
    for file in files.values.sorted() { try ask(["lint", file]) }

    for (verb, r) in seen {
      let both = r.stdout + r.stderr
      let raw = HostileText.raw(in: both)
      #expect(raw.isEmpty, "\(verb): raw \(Set(raw).sorted()) in \(both)")
      #expect(!both.contains("\nstarted com.test.forged"), "\(verb): a forged line")
    }
    // Shown, escaped, where each text appears: the refusal names the field and the value.
    let checkText = seen[0].1.stdout
    #expect(checkText.contains(HostileText.escaped) || checkText.contains("hostile[\\u{1}"), "\(checkText)")
    for field in ["moduleID", "displayName", "moduleType", "entryPoint", "description"] {
      #expect(
        checkText.contains("\(field == "description" ? "runtimeRequirements.io[0].description" : field): \""),
        "\(field): \(checkText)")
    }
    #expect(checkText.contains("named\\u{1b}[2J\\u{9b}1m\\r\\nstarted com.test.forged.json"), "\(checkText)")
    let json = seen[2].1.stdout
    #expect(json.contains("\\u001b"), "\(json)")
  }

  /// The same hostile manifests beside a module whose binary is hostile too (an exported symbol
  /// with ESC in its name, a hostile embedded manifest) and a manifest naming an entry point it
  /// lacks: `run`'s table and log, `status` (text, JSON), the page's API (`list`, `status`,
  /// `explain`), `inspect` (text, JSON) and `check` of the binary show no raw character of the
  /// rule. The control: the hostile module itself starts and `inspect` shows its symbol escaped.
  @Test func theRunningHostStatusInspectAndThePageShowItEscaped() throws {
    let hostile = Self.hostileJSON
    for (i, field) in ["displayName", "moduleType", "entryPoint", "description"].enumerated() {
      try dir.write("manifests/\(field).json", Self.manifest(id: "com.test.text\(i + 1)", field, hostile))
    }
    try dir.write(
      "manifests/moduleID.json",
      Self.manifest(id: "", "moduleID", "\"\"").replacingOccurrences(
        of: "\"moduleID\": \"\"", with: "\"moduleID\": \(hostile)"))
    var f = ModuleFixture(moduleID: "com.test.elfnames", entryPoint: "elfnames_entry")
    // Raw ESC, CSI and a bidi override in the symbol and the section: the binary is the vendor's.
    f.prelude = """
      __attribute__((used, section(".forsetti.manifest"))) static const char embedded[] =
        "{\\"moduleID\\": \\"e\\x1b[2J\\xc2\\x9b\\xe2\\x80\\xae\\"}\\r\\nstarted com.test.forged";
      __asm__(".globl \\"evil\\x1b[2Jname\\"\\n.type \\"evil\\x1b[2Jname\\", @function\\n\\"evil\\x1b[2Jname\\":\\n ret\\n");
      """
    try f.install(in: dir)
    try dir.write(
      "manifests/absent.json",
      f.manifest().replacingOccurrences(of: "com.test.elfnames", with: "com.test.absent")
        .replacingOccurrences(
          of: "\"elfnames_entry\"", with: "\"absent_entry\""))
    let state = dir.url("state")

    let (host, port, token, me) = try DebugScreenTests.launch(in: dir, for: 300)
    var seen: [(String, String)] = []
    do {
      defer { host.stop() }
      #expect(host.await("started com.test.elfnames", timeout: 120) != nil, "\(host.lines.suffix(20))")
      for args in [["status", "--state", state], ["status", "--state", state, "--json"]] {
        let r = try HostBinary.run(args, in: dir.path)
        seen.append((args.joined(separator: " "), r.stdout + r.stderr))
      }
      for body in [
        #"{"verb":"list"}"#, #"{"verb":"status"}"#, #"{"verb":"explain","module":"com.test.text1"}"#,
        #"{"verb":"explain","module":"com.test.absent"}"#,
      ] {
        let r = try DebugScreenTests.exchange(
          port, DebugScreenTests.request("POST", "/api", host: me, token: token, csrf: true, body: body))
        #expect(r.status == 200, "\(body): \(r.text)")
        // The answer's body (its head's lines end in CR LF, as HTTP's do).
        seen.append(
          ("page \(body)", r.text.range(of: "\r\n\r\n").map { String(r.text[$0.upperBound...]) } ?? ""))
      }
    }
    seen.append(("run", host.lines.joined(separator: "\n")))
    let binary = dir.url("plugins/elfnames_entry.so")
    let inspected = try HostBinary.run(["inspect", binary], in: dir.path)
    seen.append(("inspect", inspected.stdout + inspected.stderr))
    let inspectedJSON = try HostBinary.run(["inspect", binary, "--json"], in: dir.path)
    seen.append(("inspect --json", inspectedJSON.stdout + inspectedJSON.stderr))
    let checked = try HostBinary.run(
      [
        "check", "--manifests", dir.url("manifests"), "--plugins", dir.url("plugins"), "--state", state,
        "--trace",
      ],
      in: dir.path)
    seen.append(("check --trace", checked.stdout + checked.stderr))

    for (verb, text) in seen {
      let raw = HostileText.raw(in: text)
      #expect(raw.isEmpty, "\(verb): raw \(Set(raw).sorted()) in \(text)")
      #expect(!text.contains("\nstarted com.test.forged"), "\(verb): a forged line")
    }
    // Each place answered: a module's ID, the host running (status counts only), or the symbol.
    for (verb, text) in seen {
      #expect(
        text.contains("com.test.") || text.contains("running") || text.contains("evil"), "\(verb): \(text)")
    }
    #expect(seen.first { $0.0 == "page {\"verb\":\"list\"}" }?.1.contains("com.test.absent") == true)
    #expect(seen.first { $0.0 == "run" }?.1.contains("hostile[\\u{1}") == true, "\(host.lines)")
    #expect(inspected.stdout.contains("evil\\u{1b}[2Jname"), "\(inspected.stdout)")
    #expect(inspected.stdout.contains("\\u{9b}\\u{202e}"), "\(inspected.stdout)")
    #expect(inspectedJSON.stdout.contains("evil\\u001b[2Jname"), "\(inspectedJSON.stdout)")
  }
}
