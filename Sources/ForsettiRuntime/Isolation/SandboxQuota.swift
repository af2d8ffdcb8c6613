/// The rule of a sandbox quota (`--sandbox-quota`): what a worker's file-size limit should be
/// given what its sandbox holds on disk. A process-wide RLIMIT_FSIZE bounds where any write may
/// reach, not what a module holds, so it is the quota's brake, not its measure: under the quota
/// the limit is the quota itself (no one file is larger); at or over it the soft limit is 0 and
/// every write fails `EFBIG` while unlink and shrinking still work, until the host counts it
/// back under. A module may raise its own soft limit up to the hard one: doing so while over
/// its quota sets the hard limit to 0 for the rest of that worker's life.
enum SandboxQuota {
  /// Where a watched module stands.
  enum Standing: Sendable, Hashable {
    case under
    case over
    /// Raised its own limit while over: writes refused until the worker ends.
    case locked
  }

  /// What the meter does to the worker's limit.
  enum Step: Sendable, Hashable {
    case none
    /// Soft limit to 0.
    case refuseWrites
    /// Soft limit back to the hard one.
    case allowWrites
    /// Soft and hard limit to 0.
    case lock
  }

  /// The next standing and the step to take, from `usage` bytes on disk against `quota`, with
  /// the soft limit the worker has now.
  static func next(_ standing: Standing, usage: UInt64, quota: UInt64, softLimit: UInt64) -> (Standing, Step)
  {
    switch standing {
    case .locked:
      return (.locked, softLimit == 0 ? .none : .lock)
    case .under:
      return usage >= quota ? (.over, .refuseWrites) : (.under, .none)
    case .over:
      if softLimit != 0 { return (.locked, .lock) }
      return usage < quota ? (.under, .allowWrites) : (.over, .none)
    }
  }

  /// Milliseconds until the next count: often where a write could cross the quota soon (at
  /// three quarters of it or over), else once a second.
  static func intervalMilliseconds(usage: UInt64, quota: UInt64) -> Int {
    usage >= quota - quota / 4 ? 100 : 1000
  }

  /// The file-size limit a worker starts with: no file larger than the quota (or the
  /// configured file-size limit, when smaller).
  static func startLimit(fileSizeBytes: UInt64?, quota: UInt64?) -> UInt64? {
    guard let quota else { return fileSizeBytes }
    return min(fileSizeBytes ?? .max, quota)
  }

  /// Whole MiB, rounded up, for a message.
  static func mebibytes(_ bytes: UInt64) -> UInt64 { bytes / 1_048_576 + (bytes % 1_048_576 == 0 ? 0 : 1) }
}
