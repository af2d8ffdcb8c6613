import ForsettiCore
import Testing

/// The error `text` (or `bytes`) produces, or nil when it parses.
private func syntaxError(_ text: String) -> JSONSyntaxError? {
  syntaxError(bytes: Array(text.utf8))
}

private func syntaxError(bytes: [UInt8], maxDepth: Int = JSONParser.defaultMaxDepth) -> JSONSyntaxError? {
  do {
    _ = try JSONParser.parse(bytes, maxDepth: maxDepth)
    return nil
  } catch {
    return error
  }
}

@Suite("JSONParser: valid documents")
struct JSONParserValidTests {
  @Test("an object keeps its members in written order with every value type")
  func objectWithEveryType() throws {
    let value = try JSONParser.parse(
      #"{"z": null, "b": true, "f": false, "n": -12.5e3, "s": "text", "a": [1, [], {}], "o": {"k": "v"}}"#)
    let object = try #require(value.objectValue)
    #expect(object.keys == ["z", "b", "f", "n", "s", "a", "o"])
    #expect(object["z"] == .null)
    #expect(object["b"] == .bool(true))
    #expect(object["f"] == .bool(false))
    #expect(object["n"] == .number("-12.5e3"))
    #expect(object["s"] == .string("text"))
    #expect(object["a"] == .array([.number("1"), .array([]), .object(JSONObject())]))
    #expect(object["o"] == .object(JSONObject([("k", .string("v"))])))
  }

  @Test(
    "number lexemes are kept exactly as written",
    arguments: [
      "0", "-0", "1", "1.0", "1.50", "-7", "1e10", "1E+2", "2.5e-3", "123456789012345678901234567890",
    ])
  func numberLexemes(_ lexeme: String) throws {
    #expect(try JSONParser.parse(lexeme) == .number(lexeme))
    #expect(try JSONParser.parse("[\(lexeme)]") == .array([.number(lexeme)]))
  }

  @Test("integerValue is set only for numbers without fraction or exponent")
  func integerValue() throws {
    #expect(try JSONParser.parse("42").integerValue == 42)
    #expect(try JSONParser.parse("-3").integerValue == -3)
    #expect(try JSONParser.parse("1.0").integerValue == nil)
    #expect(try JSONParser.parse("1e2").integerValue == nil)
    #expect(try JSONParser.parse("\"1\"").integerValue == nil)
  }

  @Test("top-level scalars are documents")
  func topLevelScalars() throws {
    #expect(try JSONParser.parse("null") == .null)
    #expect(try JSONParser.parse("true") == .bool(true))
    #expect(try JSONParser.parse("\"x\"") == .string("x"))
    #expect(try JSONParser.parse(" \n\t\r 7 \n") == .number("7"))
  }

  @Test("every escape decodes to its character")
  func escapes() throws {
    let value = try JSONParser.parse(#""\" \\ \/ \b \f \n \r \t \u00e9 \u20AC \ud83d\ude00 \u0000""#)
    #expect(value == .string("\" \\ / \u{08} \u{0C} \n \r \t é € 😀 \u{0}"))
  }

  @Test("raw UTF-8 in strings is kept")
  func rawUTF8() throws {
    #expect(try JSONParser.parse(#"{"名前": "Ünïcödé 😀"}"#) == .object(JSONObject([("名前", "Ünïcödé 😀")])))
  }

  @Test("a UTF-8 byte order mark is skipped")
  func byteOrderMark() throws {
    #expect(try JSONParser.parse([0xEF, 0xBB, 0xBF] + Array("[1]".utf8)) == .array([.number("1")]))
  }

  @Test("nesting up to the depth limit parses; one level more throws")
  func depthBoundary() throws {
    let limit = JSONParser.defaultMaxDepth
    let atLimit = String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
    #expect(syntaxError(atLimit) == nil)
    let over = String(repeating: "[", count: limit + 1) + String(repeating: "]", count: limit + 1)
    let e = try #require(syntaxError(over))
    #expect(e.problem.contains("nesting deeper than \(limit)"))
  }

  @Test("a custom maxDepth is honoured")
  func customDepth() throws {
    #expect(syntaxError(bytes: Array(#"{"a":{"b":1}}"#.utf8), maxDepth: 2) == nil)
    let e = try #require(syntaxError(bytes: Array(#"{"a":{"b":[1]}}"#.utf8), maxDepth: 2))
    #expect(e.problem.contains("nesting deeper than 2"))
    #expect(e.column == 11)
  }
}

@Suite("JSONParser: syntax errors")
struct JSONParserErrorTests {
  @Test("trailing comma in an object")
  func trailingCommaObject() throws {
    let e = try #require(syntaxError(#"{"a": 1,}"#))
    #expect(e.problem.contains("expected a string key"))
    #expect((e.line, e.column) == (1, 9))
  }

  @Test("trailing comma in an array")
  func trailingCommaArray() throws {
    let e = try #require(syntaxError("[1, 2,]"))
    #expect(e.problem.contains("expected a value"))
    #expect((e.line, e.column) == (1, 7))
  }

  @Test("duplicate key is reported at the second occurrence")
  func duplicateKey() throws {
    let e = try #require(syntaxError(#"{"a":1,"a":2}"#))
    #expect(e.problem == #"duplicate key "a""#)
    #expect((e.line, e.column) == (1, 8))
  }

  @Test("duplicate key in a nested object")
  func duplicateNestedKey() throws {
    let e = try #require(syntaxError("{\"outer\": {\n  \"moduleID\": \"a\",\n  \"moduleID\": \"b\"}}"))
    #expect(e.problem == #"duplicate key "moduleID""#)
    #expect((e.line, e.column) == (3, 3))
  }

  @Test("unterminated string is reported at its opening quote")
  func unterminatedString() throws {
    let e = try #require(syntaxError(#"{"a": "abc"#))
    #expect(e.problem == "unterminated string")
    #expect((e.line, e.column) == (1, 7))
  }

  @Test("unterminated string ending in a backslash")
  func unterminatedAfterBackslash() throws {
    let e = try #require(syntaxError(#""abc\"#))
    #expect(e.problem == "unterminated string")
    #expect(e.column == 1)
  }

  @Test("bad escape is reported at the backslash", arguments: ["x", "a", "U", "'", "0"])
  func badEscape(_ letter: String) throws {
    let e = try #require(syntaxError("[\"ab\\\(letter)\"]"))
    #expect(e.problem == "invalid escape '\\\(letter)'")
    #expect((e.line, e.column) == (1, 5))
  }

  @Test("bad \\u escapes", arguments: [#""\u12G4""#, #""\u12""#, #""\u""#])
  func badUnicodeEscape(_ text: String) throws {
    let e = try #require(syntaxError(text))
    #expect(e.problem.contains("\\u escape"))
  }

  @Test("leading zero", arguments: ["01", "[00]", "-01", #"{"major": 01}"#])
  func leadingZero(_ text: String) throws {
    let e = try #require(syntaxError(text))
    #expect(e.problem == "invalid number: leading zero")
  }

  @Test(
    "other malformed numbers",
    arguments: ["-", "1.", ".5", "+1", "1e", "1e+", "0x10", "NaN", "Infinity", "1.e3"])
  func malformedNumbers(_ text: String) throws {
    #expect(syntaxError(text) != nil, "\(text) must not parse")
  }

  @Test("raw control characters inside strings", arguments: [UInt8(0x00), 0x01, 0x09, 0x0A, 0x1F])
  func controlCharacter(_ byte: UInt8) throws {
    let e = try #require(syntaxError(bytes: Array(#"{"k": "a"#.utf8) + [byte] + Array(#"b"}"#.utf8)))
    #expect(e.problem.hasPrefix("control character in string"))
    #expect((e.line, e.column) == (1, 9))
  }

  @Test("the control character hint names a valid four-digit escape")
  func controlCharacterHint() throws {
    let tab = try #require(syntaxError(bytes: Array("\"a\tb\"".utf8)))
    #expect(tab.problem.contains("\\u0009"), "hint was: \(tab.problem)")
    let unitSeparator = try #require(syntaxError(bytes: [0x22, 0x1F, 0x22]))
    #expect(unitSeparator.problem.contains("\\u001f"), "hint was: \(unitSeparator.problem)")
  }

  @Test(
    "invalid UTF-8 inside a string",
    arguments: [
      [UInt8(0xFF)],  // never valid
      [0xC3],  // truncated two-byte sequence
      [0xC0, 0xAF],  // overlong "/"
      [0xED, 0xA0, 0x80],  // UTF-16 surrogate encoded in UTF-8
      [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
      [0x80],  // lone continuation byte
    ])
  func invalidUTF8(_ bad: [UInt8]) throws {
    let e = try #require(syntaxError(bytes: Array(#"{"k": "ok"#.utf8) + bad + Array(#""}"#.utf8)))
    #expect(e.problem == "string is not valid UTF-8")
    #expect((e.line, e.column) == (1, 7))
  }

  @Test("invalid UTF-8 outside a string")
  func invalidUTF8OutsideString() throws {
    let e = try #require(syntaxError(bytes: [0x5B, 0xFF, 0x5D]))
    #expect(e.problem.contains("byte 0xFF"))
    #expect(e.column == 2)
  }

  @Test("a nesting bomb 10,000 levels deep throws instead of crashing")
  func nestingBombArrays() throws {
    let bomb = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
    let e = try #require(syntaxError(bomb))
    #expect(e.problem.contains("nesting deeper than \(JSONParser.defaultMaxDepth)"))
    #expect(e.line == 1)
  }

  @Test("an unclosed nesting bomb of objects throws instead of crashing")
  func nestingBombObjects() throws {
    let e = try #require(syntaxError(String(repeating: #"{"a":"#, count: 10_000)))
    #expect(e.problem.contains("nesting deeper than"))
  }

  @Test(
    "truncated input",
    arguments: [
      ("", "expected a value"),
      ("   ", "expected a value"),
      (#"{"a":"#, "expected a value"),
      (#"{"a""#, "expected ':'"),
      (#"{"a":1"#, "expected ',' or '}'"),
      ("[1, 2", "expected ',' or ']'"),
      ("{", "expected a string key"),
      ("[", "expected a value"),
      ("tru", "expected a value"),
      ("nul", "expected a value"),
      (#""\u00"#, "truncated \\u escape"),
    ])
  func truncated(_ text: String, _ expected: String) throws {
    let e = try #require(syntaxError(text))
    #expect(e.problem.contains(expected), "problem was: \(e.problem)")
  }

  @Test(
    "lone or mismatched surrogates",
    arguments: [
      #""\ud800""#, #""\udc00""#, #""\uDBFF x""#, #""\ud800\u0041""#, #""\ud800\ud800""#, #""\ude00\ud83d""#,
    ]
  )
  func loneSurrogate(_ text: String) throws {
    let e = try #require(syntaxError(text))
    #expect(e.problem == "unpaired surrogate in \\u escape")
    #expect(e.column == 2)
  }

  @Test("content after the document", arguments: ["{} x", "[1] [2]", "1 2", "null,"])
  func trailingContent(_ text: String) throws {
    let e = try #require(syntaxError(text))
    #expect(e.problem.contains("after the end of the document"))
  }

  @Test(
    "JSON5 and JavaScript habits are rejected",
    arguments: ["{'a': 1}", "{a: 1}", "[1] // comment", "/* c */ 1", "TRUE", "[undefined]", "{\"a\" 1}"])
  func notJSON(_ text: String) throws {
    #expect(syntaxError(text) != nil, "\(text) must not parse")
  }

  @Test("non-string keys are rejected")
  func nonStringKey() throws {
    let e = try #require(syntaxError("{1: 2}"))
    #expect(e.problem == "unexpected '1', expected a string key")
  }
}

@Suite("JSONParser: line and column")
struct JSONParserLocationTests {
  @Test("line and column of an error on a later line")
  func laterLine() throws {
    let text = """
      {
        "name": "x",
        "bad": tru
      }
      """
    let e = try #require(syntaxError(text))
    #expect(e.line == 3)
    #expect(e.column == 10)
    #expect(e.description == "line 3, column 10: \(e.problem)")
  }

  @Test("columns count characters, not bytes")
  func columnsCountCharacters() throws {
    let e = try #require(syntaxError(#"["é€😀", x]"#))
    #expect((e.line, e.column) == (1, 9))
  }

  @Test("CRLF line endings count as one line each")
  func crlf() throws {
    let e = try #require(syntaxError("{\r\n\"a\": 1,\r\n\"a\": 2}"))
    #expect(e.line == 3)
    #expect(e.column == 1)
  }

  @Test("an error at the end of a multi-line file points past the last character")
  func endOfFile() throws {
    let e = try #require(syntaxError("[\n1,\n2"))
    #expect((e.line, e.column) == (3, 2))
  }
}

@Suite("JSONWriter")
struct JSONWriterTests {
  static let sample: JSONValue = [
    "schemaVersion": "1.0",
    "list": [1, true, nil, "x"],
    "nested": ["empty": [], "obj": [:]],
    "n": .number("1.50"),
  ]

  @Test("compact output keeps member order and number lexemes")
  func compact() {
    #expect(
      JSONWriter.string(Self.sample)
        == #"{"schemaVersion":"1.0","list":[1,true,null,"x"],"nested":{"empty":[],"obj":{}},"n":1.50}"#)
  }

  @Test("pretty output uses two-space indentation, one member per line")
  func pretty() {
    let expected = """
      {
        "schemaVersion": "1.0",
        "list": [
          1,
          true,
          null,
          "x"
        ],
        "nested": {
          "empty": [],
          "obj": {}
        },
        "n": 1.50
      }
      """
    #expect(JSONWriter.string(Self.sample, pretty: true) == expected)
  }

  @Test(
    "strings are escaped",
    arguments: [
      ("\"", #""\"""#), ("\\", #""\\""#), ("\n", #""\n""#), ("\r", #""\r""#), ("\t", #""\t""#),
      ("\u{08}", #""\b""#), ("\u{0C}", #""\f""#), ("\u{0}", #""\u0000""#), ("\u{01}", #""\u0001""#),
      ("\u{1F}", #""\u001f""#), ("\u{2028}", #""\u2028""#), ("\u{2029}", #""\u2029""#), ("/", #""/""#),
      ("é😀", "\"é😀\""), ("\u{7F}", #""\u007f""#), ("\u{85}", #""\u0085""#), ("\u{9B}", #""\u009b""#),
      ("\u{A0}", "\"\u{A0}\""), ("\u{202E}", #""\u202e""#), ("\u{2066}", #""\u2066""#),
      ("\u{2069}", #""\u2069""#),
      ("\u{202F}", "\"\u{202F}\""),
    ])
  func escaping(_ raw: String, _ written: String) throws {
    #expect(JSONWriter.string(.string(raw)) == written)
    #expect(try JSONParser.parse(written) == .string(raw))
  }

  @Test("keys are escaped like values")
  func keyEscaping() throws {
    let value: JSONValue = ["a\"b\n": 1]
    #expect(JSONWriter.string(value) == #"{"a\"b\n":1}"#)
    #expect(try JSONParser.parse(JSONWriter.string(value)) == value)
  }

  @Test("every value survives write-then-parse, compact and pretty")
  func roundTripValue() throws {
    let everyControl = String(String.UnicodeScalarView((UInt8(0)..<0x20).map(Unicode.Scalar.init)))
    let value: JSONValue = [
      "controls": .string(everyControl),
      "unicode": "名前 😀 \u{2028}",
      "numbers": [.number("-0"), .number("1E+2"), .number("2.5e-3"), 0],
      "deep": [[[["a": [nil, false]]]]],
      "": "empty key",
    ]
    #expect(try JSONParser.parse(JSONWriter.string(value)) == value)
    #expect(try JSONParser.parse(JSONWriter.string(value, pretty: true)) == value)
  }

  @Test("compact canonical text survives parse-then-write byte for byte")
  func roundTripText() throws {
    let text = #"{"b":[1.0,-0,1E+2,"\u0001\"\\"],"a":{"z":null,"y":false},"é":"😀"}"#
    #expect(JSONWriter.string(try JSONParser.parse(text)) == text)
  }
}
