import Glibc

/// The files Debian wants in every package's `usr/share/doc/PACKAGE` (copyright, the Debian
/// changelog) and the lintian overrides of what pack cannot change, as text.
enum PackageDocuments {
  /// A machine-readable copyright file. pack does not know the module's licence: it names the
  /// vendor as holder and points to them for the terms.
  static func copyright(moduleID: String, maintainer: String, year: Int) -> String {
    """
    Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
    Upstream-Name: \(moduleID)
    Upstream-Contact: \(maintainer)

    Files: *
    Copyright: \(year) \(Maintainer.name(maintainer))
    License: proprietary
     A binary module distributed by its vendor; the terms of its use are the vendor's.
     Ask \(maintainer) for them.

    """
  }

  /// The one entry of the package's `changelog.Debian` (gzipped when staged).
  static func changelog(
    package: String, version: String, moduleVersion: String, maintainer: String, date: String
  )
    -> String
  {
    """
    \(package) (\(version)) unstable; urgency=medium

      * Module version \(moduleVersion), packaged with forsetti-host pack.

     -- \(maintainer)  \(date)

    """
  }

  /// What lintian says of every packed module that pack must not or cannot change, each with
  /// why; only the tags that apply, since an unused override is a finding of its own.
  /// - `unstripped`: the `.so` has a symbol table. Stripping would change the bytes a detached
  ///   signature covers; pack never changes the module.
  /// - `needsNothing`: the `.so` has no NEEDED library at all. A module may call only the
  ///   host's functions, which it is given at start, not linked against.
  static func lintianOverrides(package: String, library: String, unstripped: Bool, needsNothing: Bool)
    -> String
  {
    var out = """
      # Made by forsetti-host pack.
      # A vendor's package of its own module, never uploaded to Debian: there is no ITP bug to close.
      \(package): initial-upload-closes-no-bugs

      """
    let pointer = String(library.drop(while: { $0 == "/" }))
    if unstripped {
      out += """
        # The module is shipped byte for byte as built: a detached signature (FILE.so.sig) covers
        # its exact bytes, so stripping it would break the signature.
        \(package): unstripped-binary-or-object [\(pointer)]

        """
    }
    if needsNothing {
      out += """
        # A module may call only the host's functions, which it is handed at start, not linked.
        \(package): shared-library-lacks-prerequisites [\(pointer)]

        """
    }
    return out
  }

  /// An RFC 5322 date (`Thu, 04 Dec 2025 10:00:00 +0000`) in UTC, as changelogs carry.
  static func rfc2822(_ seconds: Int) -> String {
    var t = time_t(seconds)
    var parts = tm()
    gmtime_r(&t, &parts)
    let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
    let day = days[Int(parts.tm_wday) % 7]
    let month = months[Int(parts.tm_mon) % 12]
    return
      "\(day), \(two(parts.tm_mday)) \(month) \(parts.tm_year + 1900) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) +0000"
  }

  /// The year of `seconds`, in UTC.
  static func year(_ seconds: Int) -> Int {
    var t = time_t(seconds)
    var parts = tm()
    gmtime_r(&t, &parts)
    return Int(parts.tm_year) + 1900
  }
}
