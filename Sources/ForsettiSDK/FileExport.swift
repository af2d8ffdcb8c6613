import CForsetti

/// forsetti/services/file_export.h: files handed out of the host into the operator's export
/// directory, the one place outside the sandbox a module's output may land.
public struct FileExport: @unchecked Sendable {
  // @unchecked: as SecureStorage.
  let raw: UnsafePointer<forsetti_file_export>

  /// The most one write may carry; append more in further writes.
  public static let maxData = Int(FORSETTI_FILE_EXPORT_MAX_DATA)

  /// How a write meets an existing file.
  public enum Mode: Sendable {
    /// Readers see the old file or the new one, never a mix.
    case replace
    /// For files built up over time (logs, reports written row by row).
    case append
  }

  /// Writes `bytes` to the file `name` (its last path component only) and returns the file's
  /// absolute path; `.unavailable` when the host runs without `--export-dir`.
  @discardableResult
  public func write(_ name: String, _ bytes: [UInt8], mode: Mode = .replace) throws(ForsettiError) -> String {
    guard let write = raw.pointee.write else { throw .unavailable }
    // Room for the longest path the host may give (FORSETTI_FILE_EXPORT_MAX_PATH, its NUL
    // included), so BUFFER_TOO_SMALL, which writes nothing, cannot happen.
    var path = [CChar](repeating: 0, count: Int(FORSETTI_FILE_EXPORT_MAX_PATH))
    let flags: UInt32 = mode == .append ? FORSETTI_FILE_EXPORT_APPEND : 0
    let status = bytes.withUnsafeBytes { b in
      path.withUnsafeMutableBufferPointer { p in
        name.withCString { write($0, b.baseAddress, b.count, flags, p.baseAddress, p.count) }
      }
    }
    try ForsettiError.check(status)
    // The host NUL-terminates; should it not, the last byte bounds the read all the same.
    path[path.count - 1] = 0
    return path.withUnsafeBufferPointer { HostText.string($0.baseAddress) }
  }

  /// Writes the UTF-8 of `text`, for the usual report or CSV.
  @discardableResult
  public func write(_ name: String, text: String, mode: Mode = .replace) throws(ForsettiError) -> String {
    try write(name, Array(text.utf8), mode: mode)
  }
}
