import ForsettiCore
import ForsettiRuntime

/// The `DEBIAN/control` of a module's package, rendered from values: nothing the manifest says
/// can add a field or a line (control characters become spaces, lines are wrapped).
struct DebianControl: Sendable, Equatable {
  var package: String
  var version: String
  var architecture: String
  var maintainer: String
  var installedSizeKiB: Int
  var depends: [String]
  var section = "misc"
  var priority = "optional"
  /// The one-line synopsis (at most 80 characters).
  var synopsis: String
  /// The extended description's paragraphs, unwrapped.
  var paragraphs: [String]

  var text: String {
    var out = """
      Package: \(package)
      Version: \(version)
      Architecture: \(architecture)
      Maintainer: \(maintainer)
      Installed-Size: \(installedSizeKiB)

      """
    if !depends.isEmpty { out += "Depends: \(depends.joined(separator: ", "))\n" }
    out += "Section: \(section)\nPriority: \(priority)\nDescription: \(synopsis)\n"
    out += paragraphs.map { Self.wrap($0, width: 79).map { " " + $0 + "\n" }.joined() }
      .joined(separator: " .\n")
    return out
  }

  /// The synopsis and extended description of `m`'s package: its display name, what it is, and
  /// where it goes. Installing never grants trust, and the description says so.
  static func description(of m: ModuleManifest, layout: SystemLayout, shipsKey: Bool) -> (String, [String]) {
    let kind = "Forsetti \(m.moduleType.rawValue) module"
    var name = oneLine(m.displayName)
    let room = 80 - " (\(kind))".count
    if name.count > room { name = String(name.prefix(room - 3)).trimmed() + "..." }
    var paragraphs = [
      "\(oneLine(m.displayName)) (\(m.moduleID) \(m.moduleVersion)) is a \(m.moduleType.rawValue) module for the Forsetti plugin host (forsetti-host), which judges every module before any of its code runs and runs it in a confined worker.",
      "This package installs the module's binary into \(layout.plugins) and its manifest into \(layout.manifests), where the packaged host finds them. Installing it grants the module nothing: the host still asks for approval of the capabilities it requests.",
    ]
    if shipsKey {
      paragraphs.append(
        "The vendor's public key is shipped as \(layout.vendorKey(moduleID: m.moduleID)) and is not trusted: to trust it, run forsetti-host trust with that file and --for modules or --for licences."
      )
    }
    return (name + " (\(kind))", paragraphs)
  }

  /// Control characters (a newline would start a field of its own) become spaces; runs of
  /// spaces become one.
  static func oneLine(_ s: String) -> String {
    var out = ""
    for scalar in s.unicodeScalars {
      let space =
        scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
        || scalar.properties.isWhitespace
      if space {
        if !out.isEmpty && out.last != " " { out.append(" ") }
      } else {
        out.unicodeScalars.append(scalar)
      }
    }
    return out.trimmed()
  }

  /// Words into lines of at most `width` characters (a longer word is cut). A line that is
  /// only "." would end the paragraph, so none is.
  static func wrap(_ text: String, width: Int) -> [String] {
    var lines: [String] = []
    var line = ""
    var words: [Substring] = []
    for word in oneLine(text).split(separator: " ") {
      var rest = word
      while rest.count > width {
        words.append(rest.prefix(width))
        rest = rest.dropFirst(width)
      }
      words.append(rest)
    }
    for word in words {
      if line.isEmpty {
        line = String(word)
      } else if line.count + 1 + word.count <= width {
        line += " " + word
      } else {
        lines.append(line)
        line = String(word)
      }
    }
    if !line.isEmpty { lines.append(line) }
    return lines.map { $0 == "." ? ".." : $0 }
  }
}
