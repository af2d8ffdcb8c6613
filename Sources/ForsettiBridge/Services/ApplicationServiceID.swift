import CForsetti

/// The rule for the ID of a service an embedding application offers modules, stated once
/// (forsetti/services/application.h): lowercase reverse-DNS of at least three labels, the last
/// `v<major>`, never under `forsetti.`, at most FORSETTI_APPLICATION_SERVICE_MAX_ID bytes.
/// Host service IDs break it on purpose, so the two can never be confused.
package enum ApplicationServiceID {
  /// The longest ID, in bytes.
  package static let maxLength = Int(FORSETTI_APPLICATION_SERVICE_MAX_ID)

  /// Why `id` is no application service ID; nil when it is one.
  package static func problem(_ id: String) -> String? {
    let bytes = Array(id.utf8)
    if bytes.isEmpty { return "it is empty" }
    if bytes.count > maxLength { return "it is \(bytes.count) bytes long, more than \(maxLength)" }
    if id.hasPrefix("forsetti.") { return "the forsetti. prefix is the host's own" }
    let labels = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
    guard labels.count >= 3 else {
      return
        "it has \(labels.count) dot-separated labels; it needs at least three (e.g. com.example.weather.v1)"
    }
    for label in labels {
      guard let first = label.first else { return "it has an empty label" }
      guard isLowerAlphanumeric(first) else {
        return "a label starts with a character other than a-z or 0-9"
      }
      guard label.allSatisfy({ isLowerAlphanumeric($0) || $0 == UInt8(ascii: "-") }) else {
        return "a label holds a character other than a-z, 0-9 or '-'"
      }
    }
    guard let version = labels.last, version.count >= 2, version.first == UInt8(ascii: "v"),
      version.dropFirst().allSatisfy(isDigit)
    else { return "the last label is not the major version (v1, v2, …)" }
    return nil
  }

  private static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

  private static func isLowerAlphanumeric(_ c: UInt8) -> Bool {
    isDigit(c) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z"))
  }
}
