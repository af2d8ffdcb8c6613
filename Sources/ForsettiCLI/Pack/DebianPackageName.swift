/// A module ID as a Debian package name: lowercased, every character outside Debian's
/// `[a-z0-9+.-]` turned into `-` (Debian Policy 5.6.1). `com.Vendor.my_thing` →
/// `com.vendor.my-thing`.
enum DebianPackageName {
  /// The name, or why the ID cannot be one (it must start with a letter or digit and be at
  /// least two characters long).
  static func from(moduleID: String) -> Result<String, PackError> {
    var name = ""
    for scalar in moduleID.unicodeScalars {
      switch scalar.value {
      case 0x41...0x5A: name.unicodeScalars.append(Unicode.Scalar(scalar.value + 0x20) ?? "-")
      case 0x61...0x7A, 0x30...0x39, 0x2B, 0x2E, 0x2D: name.unicodeScalars.append(scalar)
      default: name.append("-")
      }
    }
    guard name.count >= 2 else {
      return .failure(.packageName(moduleID: moduleID, why: "a package name has at least two characters"))
    }
    guard let first = name.unicodeScalars.first, isAlphanumeric(first) else {
      return .failure(
        .packageName(moduleID: moduleID, why: "\"\(name)\" would not start with a letter or digit"))
    }
    return .success(name)
  }

  static func isAlphanumeric(_ s: Unicode.Scalar) -> Bool {
    (0x61...0x7A).contains(s.value) || (0x30...0x39).contains(s.value)
  }
}
