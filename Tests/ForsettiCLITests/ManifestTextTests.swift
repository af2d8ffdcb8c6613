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
}
