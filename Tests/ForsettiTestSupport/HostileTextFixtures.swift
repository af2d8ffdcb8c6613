import Foundation

/// Text a hostile module writes to be shown raw: every class of the module-text rule (C0 with
/// ESC, CR and LF, DEL, C1 with NEL and CSI, the line and paragraph separators, the bidirectional
/// embeddings, overrides and isolates) and a forged host line, and the module that writes it
/// through every channel: its log call, its standard output and error, its health report and
/// its telemetry. What the test expects is written here independently of the host's rule.
public enum HostileText {
  /// The characters, each class's edges and the notorious ones.
  public static let scalars: [UInt32] = [
    0x01, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B, 0x1F, 0x7F, 0x80, 0x85, 0x9B, 0x9F, 0x2028, 0x2029,
    0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069,
  ]

  /// What a line forged by a module says: the host's answer to `enable`.
  public static let forged = "host: com.test.victim is now started"

  /// The neighbours of the classes, shown as they are: `~`, NBSP, U+2027, U+202F, U+2065, U+206A.
  public static let kept = " (kept: ~\u{a0}\u{2027}\u{202f}\u{2065}\u{206a})"

  /// `[<each character>]`, then the forged line after a CR LF, then `kept`.
  public static let text: String = {
    var s = "hostile["
    for v in scalars { if let u = Unicode.Scalar(v) { s.unicodeScalars.append(u) } }
    return s + "]\r\n" + forged + kept
  }()

  /// How each character must be shown in text: `\n`, `\r`, `\t`, else `\u{hex}`.
  public static func shown(_ v: UInt32) -> String {
    switch v {
    case 0x0A: "\\n"
    case 0x0D: "\\r"
    case 0x09: "\\t"
    default: "\\u{\(String(v, radix: 16))}"
    }
  }

  /// The whole text as it must be shown.
  public static let escaped: String = "hostile[" + scalars.map(shown).joined() + "]\\r\\n" + forged + kept

  /// How JSON must write each character: `\uXXXX`, or JSON's short escapes.
  public static func json(_ v: UInt32) -> String {
    switch v {
    case 0x0A: "\\n"
    case 0x0D: "\\r"
    case 0x09: "\\t"
    case 0x08: "\\b"
    case 0x0C: "\\f"
    default:
      "\\u" + String(repeating: "0", count: 4 - String(v, radix: 16).count) + String(v, radix: 16)
    }
  }

  /// The characters of `s` that must never be written raw; `allowingNewlines` leaves out LF,
  /// which ends the lines of a log or of JSON.
  public static func raw(in s: String, allowingNewlines: Bool = true) -> [String] {
    s.unicodeScalars.filter { u in
      guard !(allowingNewlines && u == "\n") else { return false }
      switch u.value {
      case 0x00...0x1F, 0x7F...0x9F, 0x2028...0x202E, 0x2066...0x2069: return true
      default: return false
      }
    }.map { "U+" + String($0.value, radix: 16) }
  }

  /// `s` as a C string literal: every byte outside plain ASCII as its own `"\xNN"` piece (so no
  /// hex escape runs into the next character).
  public static func cLiteral(_ s: String) -> String {
    var out = "\""
    for b in s.utf8 {
      if b >= 0x20 && b < 0x7F && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") {
        out.append(Character(Unicode.Scalar(b)))
      } else {
        out += "\" \"\\x" + (b < 16 ? "0" : "") + String(b, radix: 16) + "\" \""
      }
    }
    return out + "\""
  }

  /// The telemetry attributes, `{"text": text}`, as JSON a module would write: the C0
  /// characters as `\u00XX` (JSON refuses them raw), everything else as UTF-8.
  public static var attributesJSON: String {
    var body = ""
    for u in text.unicodeScalars {
      if u.value < 0x20 {
        body += "\\u00" + (u.value < 16 ? "0" : "") + String(u.value, radix: 16)
      } else if u == "\"" || u == "\\" {
        body += "\\" + String(u)
      } else {
        body.unicodeScalars.append(u)
      }
    }
    return "{\"text\":\"" + body + "\"}"
  }

  /// The module: at start it writes the text to its standard output and error, reports it as
  /// its health summary (degraded), records it as a telemetry event named `hostile.event`, and
  /// logs `ready`; then a thread logs `hostile #N <text>` every 200 ms until stopped (a page that
  /// connects late still sees one).
  public static func module(_ moduleID: String = "com.test.hostile") -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: "hostile_text_entry")
    f.prelude = """
      #include <pthread.h>
      static volatile int g_stop;
      static pthread_t g_thread;
      static const char *k_text = \(cLiteral(text));
      static void *repeat(void *a) {
        (void)a; char line[1024];
        for (unsigned n = 0; !g_stop; n++) {
          snprintf(line, sizeof line, "hostile #%u %s", n, k_text);
          g_host->log(FORSETTI_LOG_INFO, line);
          for (int k = 0; k < 4 && !g_stop; k++) usleep(50000);
        }
        return NULL;
      }
      """
    f.start = """
      dprintf(1, "stdout %s\\n", k_text);
      dprintf(2, "stderr %s\\n", k_text);
      const forsetti_diagnostics *d = host->resolve(FORSETTI_SERVICE_DIAGNOSTICS);
      const forsetti_telemetry *t = host->resolve(FORSETTI_SERVICE_TELEMETRY);
      if (!d || !t) return FORSETTI_ERR_DENIED;
      if (d->report(FORSETTI_HEALTH_DEGRADED, k_text) != FORSETTI_OK) return FORSETTI_ERR_START_FAILED;
      if (t->record("hostile.event", \(cLiteral(attributesJSON))) != FORSETTI_OK) return FORSETTI_ERR_START_FAILED;
      fixture_log("ready");
      pthread_create(&g_thread, NULL, repeat, NULL);
      return FORSETTI_OK;
      """
    f.stop = "g_stop = 1; pthread_join(g_thread, NULL);"
    return f
  }

  /// A module that writes the text to its standard error and log and then aborts in `start`:
  /// the host's crash report quotes its last lines.
  public static func crasher(_ moduleID: String = "com.test.hostile.crash") -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: "hostile_crash_entry")
    f.prelude = "static const char *k_text = \(cLiteral(text));"
    f.start = """
      dprintf(2, "dying %s\\n", k_text);
      fixture_log(k_text);
      usleep(100000);
      abort();
      """
    return f
  }

  /// A UI module whose toolbar item's title is the text (`surface` shows it).
  public static func uiModule(_ moduleID: String = "com.test.hostile.ui") -> ModuleFixture {
    var f = ModuleFixture(moduleID: moduleID, entryPoint: "hostile_ui_entry")
    f.type = "ui"
    f.prelude = """
      static const forsetti_toolbar_item items[] = {{"t.hostile", \(cLiteral(text)), NULL}};
      static const forsetti_ui_contributions ui = {
        sizeof(forsetti_ui_contributions), items, 1, NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0 };
      """
    f.uiContributions = "&ui"
    return f
  }

  /// What `uiModule`'s manifest adds, and the capability it needs.
  public static let uiManifestExtra =
    #","manifestTemplateVersion":"1.1","runtimeRequirements":{"io":[],"dataIsolation":{"mode":"private_to_module"},"ui":{"toolbarItemIDs":["t.hostile"],"viewIDs":[],"slotIDs":[],"routeIDs":[],"themeIDs":[]}}"#
  public static let uiCapabilities = ["toolbar_items"]

  /// The capabilities `module` needs.
  public static let capabilities = ["diagnostics", "telemetry"]
}
