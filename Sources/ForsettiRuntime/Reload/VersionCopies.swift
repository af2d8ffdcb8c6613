import ForsettiBridge
import Foundation

/// Content-named copies of module binaries under `STATE/versions/<moduleID>/`. Loading from a
/// copy gives every version its own path (the dynamic loader matches images by device and
/// inode, so a hardlink or the same path would hand back the old image) and keeps the previous
/// version loadable after its file has been replaced.
public enum VersionCopies {
  public static func copy(_ path: String, moduleID: String, stateDirectory: String) -> Result<
    String, AtomicFile.WriteError
  > {
    guard let data = FileManager.default.contents(atPath: path),
      let identity = BinaryIdentity.of(path, contents: data)
    else {
      return .failure(.failed(path: path, step: "read", errno: errno))
    }
    let dir = (stateDirectory as NSString).appendingPathComponent("versions/\(moduleID)")
    let name = String(identity.hash, radix: 16) + "-" + (path as NSString).lastPathComponent
    let target = (dir as NSString).appendingPathComponent(name)
    if FileManager.default.fileExists(atPath: target) { return .success(target) }
    // A cache of the binary: complete or absent (rename), but no fsync on the reload path.
    do { try AtomicFile.write([UInt8](data), to: target, mode: 0o755, durable: false) } catch {
      return .failure(error)
    }
    return .success(target)
  }
}
