import CForsettiSys
import ForsettiCore
import Glibc

/// What a running host hands the image that takes it over in the same process
/// (`forsetti-host upgrade`): the descriptors it keeps open across `execve` — the state
/// directory it holds, its `host.lock`, its listening control socket — and what identifies the
/// upgrade. Written as JSON into a memfd whose number the new image finds in
/// `FORSETTI_UPGRADE_FD`; read once, at the new image's start, and checked there: a descriptor
/// that is not what the document says it is refuses the handover.
package struct Handover: Sendable, Equatable {
  /// The document's format (2: with running modules' workers and `/metrics`' socket). An image
  /// reads its own and those before it, and writes its own: an older one that does not read it
  /// refuses the upgrade at its preflight, which reads the same format the exec is handed.
  package static let format = 2
  /// The variable that names the memfd (a descriptor number) to the new image.
  package static let environmentVariable = "FORSETTI_UPGRADE_FD"
  /// A document larger than this is not one a host wrote, nor one it writes: a host whose
  /// modules' subscriptions and output would make it larger refuses the upgrade instead.
  static let maxBytes = 64 << 20

  /// The upgrade's identity: `status` of the new image shows it, so `upgrade` knows the image
  /// that answers is the one it asked for.
  package var token: String
  /// The version of the image that handed over.
  package var fromVersion: String
  /// The executable the new image was started from.
  package var executable: String
  /// The state directory's path, as the host names it.
  package var stateDirectory: String
  /// The open state directory (`StateDirectoryHold`).
  package var holdFD: Int32
  /// `host.lock`, locked (`HostLock`): the lock belongs to the open file, so it is never let go.
  package var lockFD: Int32
  /// The listening control socket; nil when the host has none.
  package var controlFD: Int32?
  /// The listening socket of `/metrics`; nil when the host serves none.
  package var metricsFD: Int32? = nil
  /// When the first image of this host started, and how many upgrades it has been through.
  package var startedAt: Int64
  package var upgrades: Int
  /// The in-memory overrides set through the control socket (module and product IDs to on or
  /// off), which the new image's judge starts with.
  package var overriddenModules: [String: OverrideState] = [:]
  package var overriddenProducts: [String: OverrideState] = [:]
  /// The running modules' workers, and the role channels between them.
  package var workers: [WorkerHandover] = []
  /// Crash counts and pending restarts.
  package var restarts: [RestartHandover] = []
  package var channels: [ChannelHandover] = []

  package init(
    token: String, fromVersion: String, executable: String, stateDirectory: String, holdFD: Int32,
    lockFD: Int32, controlFD: Int32?, startedAt: Int64, upgrades: Int
  ) {
    self.token = token
    self.fromVersion = fromVersion
    self.executable = executable
    self.stateDirectory = stateDirectory
    self.holdFD = holdFD
    self.lockFD = lockFD
    self.controlFD = controlFD
    self.startedAt = startedAt
    self.upgrades = upgrades
  }

  /// Why a handover was refused.
  package enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    case unreadable(String)
    case malformed(String)
    case format(Int)
    case tooLarge(String)
    case descriptor(name: String, fd: Int32, String)

    package var description: String {
      switch self {
      case .unreadable(let why): "the handover cannot be read: \(why)"
      case .malformed(let why): "the handover is not one a host wrote: \(why)"
      case .tooLarge(let why): "the handover would be too large: \(why)"
      case .format(let f): "the handover is of format \(f); this image reads formats 1 to \(Handover.format)"
      case .descriptor(let name, let fd, let why): "the handed-over \(name) (descriptor \(fd)) \(why)"
      }
    }
  }

  /// Every descriptor the document names, the image's own and its workers'.
  package var descriptors: [Int32] {
    [holdFD, lockFD] + (controlFD.map { [$0] } ?? []) + (metricsFD.map { [$0] } ?? [])
      + workers.flatMap(\.descriptors) + channels.map(\.fd)
  }

  package var json: JSONValue {
    var o = JSONObject([
      ("format", .number(String(Self.format))), ("token", .string(token)),
      ("fromVersion", .string(fromVersion)),
      ("executable", .string(executable)), ("stateDirectory", .string(stateDirectory)),
      ("holdFD", .number(String(holdFD))), ("lockFD", .number(String(lockFD))),
      ("startedAt", .number(String(startedAt))), ("upgrades", .number(String(upgrades))),
    ])
    o["controlFD"] = controlFD.map { .number(String($0)) } ?? .null
    o["metricsFD"] = metricsFD.map { .number(String($0)) } ?? .null
    func table(_ t: [String: OverrideState]) -> JSONValue {
      .object(JSONObject(t.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value.rawValue)) }))
    }
    o["overrides"] = .object(
      JSONObject([("modules", table(overriddenModules)), ("products", table(overriddenProducts))]))
    o["workers"] = .array(workers.map(\.json))
    o["channels"] = .array(channels.map(\.json))
    o["restarts"] = .array(restarts.map(\.json))
    return .object(o)
  }

  /// The document in `bytes`, its members checked by type; the descriptors are not looked at.
  package static func decode(_ bytes: [UInt8]) throws(Refusal) -> Handover {
    guard bytes.count <= maxBytes else { throw .malformed("larger than \(maxBytes) bytes") }
    let value: JSONValue
    do { value = try JSONParser.parse(bytes) } catch { throw .malformed("\(error)") }
    guard let o = value.objectValue else { throw .malformed("not an object") }
    func int(_ name: String) throws(Refusal) -> Int {
      guard let i = o[name]?.integerValue else { throw .malformed("\(name) must be an integer") }
      return i
    }
    func fd(_ name: String) throws(Refusal) -> Int32 {
      guard let n = Int32(exactly: try int(name)), n >= 0 else {
        throw .malformed("\(name) is not a descriptor")
      }
      return n
    }
    func string(_ name: String) throws(Refusal) -> String {
      guard let s = o[name]?.stringValue else { throw .malformed("\(name) must be a string") }
      return s
    }
    let format = try int("format")
    guard format >= 1, format <= Self.format else { throw .format(format) }
    var control: Int32?
    if let v = o["controlFD"], v != .null { control = try fd("controlFD") }
    var h = Handover(
      token: try string("token"), fromVersion: try string("fromVersion"),
      executable: try string("executable"),
      stateDirectory: try string("stateDirectory"), holdFD: try fd("holdFD"), lockFD: try fd("lockFD"),
      controlFD: control, startedAt: Int64(try int("startedAt")), upgrades: try int("upgrades"))
    if format >= 2 {
      guard let workers = o["workers"]?.arrayValue, let channels = o["channels"]?.arrayValue else {
        throw .malformed("workers and channels must be arrays")
      }
      if let v = o["metricsFD"], v != .null { h.metricsFD = try fd("metricsFD") }
      func table(_ name: String) throws(Refusal) -> [String: OverrideState] {
        guard let t = o["overrides"]?.objectValue?[name]?.objectValue else {
          throw .malformed("overrides.\(name) must be an object")
        }
        var out: [String: OverrideState] = [:]
        for (id, v) in t.members {
          guard let state = v.stringValue.flatMap(OverrideState.init(rawValue:)), state != .unset else {
            throw .malformed("overrides.\(name).\(id) must be on or off")
          }
          out[id] = state
        }
        return out
      }
      h.overriddenModules = try table("modules")
      h.overriddenProducts = try table("products")
      for w in workers { h.workers.append(try WorkerHandover.decode(w)) }
      for c in channels { h.channels.append(try ChannelHandover.decode(c)) }
      guard let restarts = o["restarts"]?.arrayValue else { throw .malformed("restarts must be an array") }
      for r in restarts { h.restarts.append(try RestartHandover.decode(r)) }
    }
    let all = h.descriptors
    guard Set(all).count == all.count else { throw .malformed("a descriptor is named twice") }
    guard Set(h.workers.map(\.moduleID)).count == h.workers.count else {
      throw .malformed("a module's worker is named twice")
    }
    return h
  }

  /// The document in a memfd sealed against any change (the preflight reads the very file the
  /// new image then reads), close-on-exec: the caller hands it on explicitly.
  package func memfd(limit: Int = Handover.maxBytes) -> Result<Int32, Refusal> {
    let bytes = Array(JSONWriter.string(json).utf8)
    guard bytes.count <= limit else {
      let largest = workers.max {
        JSONWriter.string($0.json).utf8.count < JSONWriter.string($1.json).utf8.count
      }
      return .failure(
        .tooLarge(
          "it would take \(bytes.count / 1024) KiB, more than \(limit / 1024) KiB"
            + (largest.map {
              " (the largest part: \($0.moduleID)'s, \($0.subscriptions.count) subscriptions)"
            } ?? "")))
    }
    let fd = bytes.withUnsafeBytes { forsetti_memfd_document("forsetti-handover", $0.baseAddress, $0.count) }
    guard fd >= 0 else { return .failure(.unreadable(String(cString: strerror(errno)))) }
    return .success(fd)
  }

  /// Reads the document from descriptor `fd` (from its start; the descriptor is left open).
  package static func read(fd: Int32) throws(Refusal) -> Handover {
    var st = stat()
    guard fstat(fd, &st) == 0 else {
      throw .unreadable("descriptor \(fd): \(String(cString: strerror(errno)))")
    }
    guard st.st_mode & S_IFMT == S_IFREG, st.st_size <= maxBytes else {
      throw .unreadable("descriptor \(fd) is not a handover document")
    }
    var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
    let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
    guard n == bytes.count else { throw .unreadable("descriptor \(fd): a short read") }
    return try decode(bytes)
  }

  /// Checks the descriptors are what the document says and belong to `stateDirectory` (the
  /// state directory this image was configured with): the directory at that path, its
  /// `host.lock` locked by this process, a listening unix socket. Done by the image that adopts
  /// them, before any use: a variable set by mistake (or inherited) cannot make a host adopt
  /// another directory, another lock or another socket.
  package func checkDescriptors(stateDirectory: String) throws(Refusal) {
    try checkDescriptors()
    var held = stat()
    var atPath = stat()
    guard fstat(holdFD, &held) == 0, stat(stateDirectory.isEmpty ? "." : stateDirectory, &atPath) == 0,
      held.st_dev == atPath.st_dev, held.st_ino == atPath.st_ino
    else {
      throw .descriptor(name: "state directory", fd: holdFD, "is not the directory at \(stateDirectory)")
    }
    var lock = stat()
    var named = stat()
    guard fstat(lockFD, &lock) == 0, fstatat(holdFD, "host.lock", &named, AT_SYMLINK_NOFOLLOW) == 0,
      lock.st_dev == named.st_dev, lock.st_ino == named.st_ino
    else { throw .descriptor(name: "host.lock", fd: lockFD, "is not the state directory's host.lock") }
    // The lock belongs to the open file: taking it again through the same one succeeds only if
    // this process holds it (another holder's makes it fail).
    guard flock(lockFD, LOCK_EX | LOCK_NB) == 0 else {
      throw .descriptor(name: "host.lock", fd: lockFD, "is locked by another process")
    }
  }

  /// The descriptors' kinds: the held directory, a regular file (the lock), a listening unix
  /// socket; each worker's socket, rings' memory and output pipe, each channel's memory.
  package func checkDescriptors() throws(Refusal) {
    func kind(_ fd: Int32, _ name: String, _ type: mode_t) throws(Refusal) {
      var st = stat()
      guard fstat(fd, &st) == 0 else { throw .descriptor(name: name, fd: fd, "is not open") }
      guard st.st_mode & S_IFMT == type else { throw .descriptor(name: name, fd: fd, "is of another kind") }
    }
    try kind(holdFD, "state directory", S_IFDIR)
    try kind(lockFD, "host.lock", S_IFREG)
    if let metricsFD {
      try kind(metricsFD, "metrics socket", S_IFSOCK)
      guard Self.listening(metricsFD), let family = Self.domain(metricsFD),
        family == AF_INET || family == AF_INET6
      else { throw .descriptor(name: "metrics socket", fd: metricsFD, "is not a listening TCP socket") }
    }
    for w in workers {
      try kind(w.socketFD, "\(w.moduleID)'s socket", S_IFSOCK)
      try kind(w.ringFD, "\(w.moduleID)'s call ring", S_IFREG)
      if let fd = w.outputFD { try kind(fd, "\(w.moduleID)'s output", S_IFIFO) }
      var st = stat()
      guard fstat(w.doorbellFD, &st) == 0 else {
        throw .descriptor(name: "\(w.moduleID)'s doorbell", fd: w.doorbellFD, "is not open")
      }
    }
    for c in channels { try kind(c.fd, "the channel from \(c.consumer) to \(c.provider)", S_IFREG) }
    if let controlFD {
      try kind(controlFD, "control socket", S_IFSOCK)
      guard Self.listening(controlFD) else {
        throw .descriptor(name: "control socket", fd: controlFD, "is not listening")
      }
      guard Self.domain(controlFD) == AF_UNIX else {
        throw .descriptor(name: "control socket", fd: controlFD, "is not a unix socket")
      }
    }
  }

  /// Whether socket `fd` listens.
  static func listening(_ fd: Int32) -> Bool {
    var listening: Int32 = 0
    var size = socklen_t(MemoryLayout<Int32>.size)
    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 && listening != 0
  }

  /// The address family of socket `fd`.
  static func domain(_ fd: Int32) -> Int32? {
    var domain: Int32 = 0
    var size = socklen_t(MemoryLayout<Int32>.size)
    return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &size) == 0 ? domain : nil
  }
}
