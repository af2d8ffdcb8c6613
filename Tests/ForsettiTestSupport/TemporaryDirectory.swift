import Foundation

/// A fresh directory under the system temporary directory, removed when the value is released.
public final class TemporaryDirectory: Sendable {
  public let path: String

  /// Where every temporary directory of the tests is made.
  public static var base: String { (NSTemporaryDirectory() as NSString).standardizingPath }

  public init(_ label: String = "forsetti") {
    path = (NSTemporaryDirectory() as NSString).appendingPathComponent("\(label)-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  }

  deinit { try? FileManager.default.removeItem(atPath: path) }

  /// The absolute path of `relative` inside the directory.
  public func url(_ relative: String) -> String { (path as NSString).appendingPathComponent(relative) }

  /// Writes `text` to `relative`, creating intermediate directories.
  @discardableResult
  public func write(_ relative: String, _ text: String) throws -> String {
    try write(relative, bytes: Array(text.utf8))
  }

  /// Writes raw bytes to `relative`, creating intermediate directories.
  @discardableResult
  public func write(_ relative: String, bytes: [UInt8]) throws -> String {
    let full = url(relative)
    try FileManager.default.createDirectory(
      atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(bytes).write(to: URL(fileURLWithPath: full))
    return full
  }
}
