import Glibc
import Synchronization

/// The per-module bounds on what a module keeps on the host's disks through a service.
public struct ServiceQuotas: Sendable, Equatable {
  /// Bytes of all a module's sealed values under `secure/<moduleID>/` (`--storage-quota`).
  public var secureStorageBytes: Int
  /// Bytes of all a module's files under `EXPORT/<moduleID>/` (`--export-quota`).
  public var exportBytes: Int

  public init(secureStorageBytes: Int, exportBytes: Int) {
    self.secureStorageBytes = secureStorageBytes
    self.exportBytes = exportBytes
  }

  /// 16 MiB of secrets is thousands of tokens and keys (a value is at most 64 KiB), yet one module
  /// cannot fill the state disk that every module's state and the host's log share; 256 MiB of
  /// exports is room for reports and dumps the operator collects, far from a disk's size.
  public static let standard = ServiceQuotas(secureStorageBytes: 16 << 20, exportBytes: 256 << 20)
}

/// One service's quota: what it bounds, its size, and the option that sets it.
struct Quota: Sendable, Equatable, CustomStringConvertible {
  var service: String
  var bytes: Int
  var option: String

  /// "secure storage quota of 16 MiB": whole MiB when it is, KiB otherwise.
  var description: String {
    let size = bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes >> 10) KiB"
    return "\(service) quota of \(size)"
  }

  /// The operator's line when `moduleID` is refused.
  func reached(by moduleID: String) -> String {
    "\(self) reached for \(moduleID) (--\(option)); the write was refused with FORSETTI_ERR_QUOTA. Removing or overwriting its files frees room, or start the host with a larger --\(option) MiB"
  }
}

/// What a module uses of one quota, counted from disk on first use and kept up to date by every
/// write and removal. All of one module's changes run under its own lock, so many threads of one
/// module cannot overrun the quota together; other modules never wait on it.
final class QuotaLedger: Sendable {
  let quota: Quota
  /// The bytes `moduleID` holds on disk now, charged as `charge` does.
  private let count: @Sendable (String) -> Int
  private let accounts = Mutex<[String: Account]>([:])

  /// One module's meter behind its own lock.
  private final class Account: Sendable {
    let meter = Mutex<Meter?>(nil)
  }

  init(_ quota: Quota, count: @escaping @Sendable (String) -> Int) {
    self.quota = quota
    self.count = count
  }

  /// Runs `body` with `moduleID`'s meter, no other change of that module's usage running meanwhile.
  func withMeter<R: Sendable, E: Error>(_ moduleID: String, _ body: (inout Meter) throws(E) -> R) throws(E)
    -> R
  {
    let account = accounts.withLock { all in
      if let existing = all[moduleID] { return existing }
      let made = Account()
      all[moduleID] = made
      return made
    }
    // The lock is held across the caller's write: what was admitted is what lands on disk.
    let result: Result<R, E> = account.meter.withLock { stored in
      var meter = stored ?? Meter(quota, used: count(moduleID), recount: { [count] in count(moduleID) })
      defer { stored = meter }
      do throws(E) { return .success(try body(&meter)) } catch { return .failure(error) }
    }
    return try result.get()
  }

  /// What a file of `size` bytes costs: whole 4 KiB blocks and at least one, as a filesystem
  /// stores it, so that many empty files cannot exhaust inodes within the quota. Nil: no file.
  static func charge(_ size: Int?) -> Int {
    guard let size else { return 0 }
    let blocks = max(1, size / blockBytes + (size % blockBytes == 0 ? 0 : 1))
    let (bytes, overflow) = blocks.multipliedReportingOverflow(by: blockBytes)
    return overflow ? Int.max : bytes
  }

  static let blockBytes = 4096

  /// The charged bytes of the regular files in `directory` (0 when it does not exist); links
  /// and directories cost nothing, as they are never written through.
  static func bytes(in directory: String) -> Int {
    guard let dir = opendir(directory) else { return 0 }
    defer { closedir(dir) }
    let fd = dirfd(dir)
    var total = 0
    while let entry = readdir(dir) {
      let name = withUnsafePointer(to: &entry.pointee.d_name) {
        String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
      }
      guard name != ".", name != ".." else { continue }
      var st = stat()
      guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
      total = Meter.add(total, charge(Int(st.st_size)))
    }
    return total
  }
}

/// A module's usage of one quota, as its ledger holds it.
struct Meter {
  let quota: Quota
  private(set) var used: Int
  let recount: @Sendable () -> Int
  private var countedAt = ContinuousClock.now
  /// Refused since its last change: the operator has been told once already.
  private var told = false

  init(_ quota: Quota, used: Int, recount: @escaping @Sendable () -> Int) {
    self.quota = quota
    self.used = used
    self.recount = recount
  }

  /// Whether replacing a file of `old` bytes (nil: none) by one of `new` keeps the module within
  /// the limit. A change that does not grow the usage always fits (a quota lowered across a
  /// restart must not stop a module from freeing room). Before refusing, the usage is counted
  /// again from disk, at most once a second: the operator may have collected files meanwhile.
  mutating func admits(old: Int?, new: Int?) -> Bool {
    if fits(old: old, new: new) { return true }
    guard ContinuousClock.now - countedAt >= .seconds(1) else { return false }
    used = recount()
    countedAt = .now
    return fits(old: old, new: new)
  }

  private func fits(old: Int?, new: Int?) -> Bool {
    let growth = QuotaLedger.charge(new) - QuotaLedger.charge(old)
    return growth <= 0 || Self.add(used, growth) <= quota.bytes
  }

  /// A file went from `old` bytes to `new` (nil: absent).
  mutating func record(old: Int?, new: Int?) {
    let before = used
    used = max(0, Self.add(used, QuotaLedger.charge(new) - QuotaLedger.charge(old)))
    // "Once until its usage next changes": an overwrite of the same size between refusals
    // (1,002 warnings in 13 s, alternating) changes nothing the operator was told.
    if used != before { told = false }
  }

  /// Whether to tell the operator of this refusal: the first of a run of refusals only.
  mutating func tellRefusal() -> Bool {
    defer { told = true }
    return !told
  }

  /// `a + b`, saturating instead of trapping.
  static func add(_ a: Int, _ b: Int) -> Int {
    let (sum, overflow) = a.addingReportingOverflow(b)
    return overflow ? (b > 0 ? Int.max : Int.min) : sum
  }
}
