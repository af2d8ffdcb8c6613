/// What one host's workers are made from (isolated mode): where they come from (its zygote, or
/// spawns), the spare kept ahead of need, the libraries every worker and each module's own may
/// read, and the meter of their sandboxes. Owned by the lifecycle, ended with it.
///
/// Used from the host's main thread only: workers are started there (their parent-death signal
/// belongs to the thread that spawned them).
final class WorkerSupply {
  let settings: IsolationSettings
  private let environment: HostEnvironment
  /// Where this host's workers come from: its zygote, or spawns.
  let source: WorkerSource
  /// A worker started ahead of need, while `keepsSpare`.
  private(set) var spare: SpareWorker?

  /// Keep one worker process started ahead of need, so that a reload or a restart does not wait
  /// for a process to start (`dev` turns it on).
  var keepsSpare = false {
    didSet {
      guard keepsSpare else {
        spare?.shutdown()
        spare = nil
        return
      }
      guard spare == nil else { return }
      let settings = settings
      let spare = SpareWorker(source: source) { pid in HostCgroups.placeSpare(pid, settings) }
      spare.refill()
      self.spare = spare
    }
  }

  /// The library directories every worker may read (`IsolationSettings.libraryDirectories`),
  /// read from this process's maps once, at the first worker, not at each.
  lazy var libraryDirectories = IsolationSettings.libraryDirectories()
  /// The directories of each module's own libraries a worker may read (`LibraryGrants`).
  lazy var libraryGrants = LibraryGrantCache(
    protected: [environment.stateDirectory] + (environment.services.fileExport.directory.map { [$0] } ?? []))
  /// Counts every isolated module's sandbox against `--sandbox-quota` (`SandboxQuotaMeter`).
  lazy var sandboxMeter: SandboxQuotaMeter? = settings.sandboxBytes.map { quota in
    SandboxQuotaMeter(quota: quota) { [environment] id, level, message in
      environment.hostLog(level, about: id, message)
    }
  }

  init(settings: IsolationSettings, environment: HostEnvironment) {
    self.settings = settings
    self.environment = environment
    source = WorkerSource(executable: settings.workerExecutable, forks: settings.zygote) {
      [environment] line in environment.hostLog(.warning, line)
    }
    // Now, so its start overlaps the judging that comes before the first worker; here, on the
    // thread that starts workers, whose death the zygote and its workers share.
    source.prepare()
  }

  deinit {
    source.shutdown()
    sandboxMeter?.shutdown()
  }

  /// Ends the zygote and the spare (a handover to a new image: they are this image's children
  /// and would outlive it unreaped); the next worker starts a zygote again.
  func release() {
    keepsSpare = false
    source.release()
  }

  /// Starts a spare worker if one is kept and was used; called where the host's main thread is
  /// done with a batch of starts (a reload, a supervision round), not in the middle of one.
  func refill() { spare?.refill() }
}
