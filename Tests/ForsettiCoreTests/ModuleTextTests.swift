import ForsettiCore
import Testing

/// The module-text rule (`ModuleText`) at every edge of every class it escapes, and the forms it
/// takes: visible escapes in text, `\uXXXX` in JSON.
@Suite struct ModuleTextTests {
  /// Each class's edges: the first and last character escaped, and the neighbours that are not.
  static let boundaries: [(UInt32, Bool)] = [
    (0x00, true), (0x1B, true), (0x1F, true), (0x20, false), (0x7E, false), (0x7F, true), (0x80, true),
    (0x85, true), (0x9B, true), (0x9F, true), (0xA0, false), (0x2027, false), (0x2028, true), (0x2029, true),
    (0x202A, true), (0x202E, true), (0x202F, false), (0x2065, false), (0x2066, true), (0x2069, true),
    (0x206A, false), (0x200E, false), (0xFEFF, false), (0x1F600, false),
  ]

  @Test(arguments: boundaries)
  func eachClassEndsWhereTheRuleSays(_ value: UInt32, _ escaped: Bool) throws {
    let u = try #require(Unicode.Scalar(value))
    #expect(ModuleText.isEscaped(u) == escaped, "U+\(String(value, radix: 16))")
    let text = "a\(Character(u))b"
    let shown = ModuleText.visible(text)
    #expect(ModuleText.isPlain(shown), "U+\(String(value, radix: 16)) shown raw")
    if escaped {
      #expect(!shown.unicodeScalars.contains(u))
      #expect(
        ["a\\n", "a\\r", "a\\t", "a\\u{\(String(value, radix: 16))}"].contains { shown == $0 + "b" },
        "\(shown)")
      let hex = String(value, radix: 16)
      #expect(
        JSONWriter.string(.string(text)) == "\"a\\u\(String(repeating: "0", count: 4 - hex.count))\(hex)b\"")
    } else {
      #expect(shown == text)
      #expect(!JSONWriter.string(.string(text)).contains("\\u"))
    }
  }

  @Test func visibleEscapesAreTheOnesTheLogHasAlwaysShown() {
    #expect(ModuleText.visible("a\nb\rc\td\u{1b}[31m") == #"a\nb\rc\td\u{1b}[31m"#)
    #expect(ModuleText.visible("\u{9b}2J\u{85}\u{2028}\u{2029}") == #"\u{9b}2J\u{85}\u{2028}\u{2029}"#)
    #expect(ModuleText.visible("\u{202e}txt.exe\u{2066}x\u{2069}") == #"\u{202e}txt.exe\u{2066}x\u{2069}"#)
    #expect(ModuleText.visible("plain é 名前 😀") == "plain é 名前 😀")
    #expect(ModuleText.isPlain("plain é 名前 😀") && !ModuleText.isPlain("x\u{202a}"))
  }

  @Test func jsonKeepsTheValueAndHoldsNoneRaw() throws {
    let hostile = "\u{1b}[2J\u{7f}\u{85}\u{9b}31m\u{2028}\u{2029}\u{202a}\u{202e}\u{2066}\u{2069}"
    let written = JSONWriter.string(.object(JSONObject([(hostile, .string(hostile))])))
    #expect(ModuleText.isPlain(written), "\(written.unicodeScalars.map(\.value))")
    #expect(try JSONParser.parse(written) == .object(JSONObject([(hostile, .string(hostile))])))
  }
}
