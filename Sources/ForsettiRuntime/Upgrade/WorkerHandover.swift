import ForsettiBridge
import ForsettiCore

/// One running module's worker as an image of the host hands it to the next
/// (`forsetti-host upgrade`): the process, the host's ends of its channels (descriptors kept
/// open across `execve`), and what the host had entered for its module — its bus subscriptions
/// under their IDs, its message handler, the role it serves — so the new image serves the same
/// worker as the old one did, without the module seeing a stop or a start.
package struct WorkerHandover: Sendable, Equatable {
  package var moduleID: String
  package var pid: Int32
  /// The worker protocol the worker speaks (the version of the image that configured it).
  package var protocolVersion: Int = ProtocolVersion.current
  /// The host's end of the worker's socket (SOCK_SEQPACKET).
  package var socketFD: Int32
  /// The worker's rings' memory (`CallRing`).
  package var ringFD: Int32
  /// The eventfd the worker rings when the host's server sleeps.
  package var doorbellFD: Int32
  /// The read end of its output pipe; nil once the worker closed it.
  package var outputFD: Int32?
  /// Output read but not yet a whole line.
  package var pendingOutput: [UInt8]
  /// Its last lines, for a crash report.
  package var recentLines: [String]
  /// Its cgroup, one directory per hierarchy (empty: the host has none).
  package var cgroup: [CgroupPlaceHandover]
  /// Its bus subscriptions: the IDs the module holds, and their event types.
  package var subscriptions: [Subscription]
  /// Whether it took messages.
  package var messageHandler: Bool
  /// The concurrency it serves its role with; nil when it serves none from the worker.
  package var serving: Int?
  /// The capabilities its worker was confined and bound for: a new image that grants other
  /// ones starts it anew rather than keep a worker confined for another grant.
  package var granted: [String]
  /// The role it may serve and those it may call, as its worker was bound for them.
  package var serves: String? = nil
  package var calls: [String] = []
  /// The binary the worker loaded, and the module's binary as the manifest names it.
  package var loadedFrom: String
  package var loadedIsSwift: Bool
  package var binaryPath: String?
  /// Its accepted UI contributions (`WorkerCodec.loaded`), if any.
  package var ui: JSONValue?

  /// The most output handed over unfinished (a worker's longer line is cut there anyway).
  static let maxPending = 16 * 1024
  /// The most of each recent line handed over: they are for a crash report's tail, and a
  /// module's own long lines must not make the document too large to hand over.
  static let maxLine = 512

  private static let hex = (0..<16).map { String($0, radix: 16) }

  private static func nibble(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
    default: nil
    }
  }

  /// `line` cut to `maxLine` bytes of UTF-8, at a character.
  static func cut(_ line: String) -> String {
    guard line.utf8.count > maxLine else { return line }
    var out = ""
    for c in line {
      guard out.utf8.count + String(c).utf8.count <= maxLine else { break }
      out.append(c)
    }
    return out
  }

  package struct Subscription: Sendable, Equatable {
    package var id: Int64
    package var type: String
    package init(id: Int64, type: String) {
      self.id = id
      self.type = type
    }
  }

  package struct CgroupPlaceHandover: Sendable, Equatable {
    package var version: String
    package var directory: String
    package var controllers: [String]
  }

  /// The descriptors the new image must be given.
  package var descriptors: [Int32] { [socketFD, ringFD, doorbellFD] + (outputFD.map { [$0] } ?? []) }

  package var json: JSONValue {
    var o = JSONObject([
      ("moduleID", .string(moduleID)), ("pid", .number(String(pid))),
      ("protocolVersion", .number(String(protocolVersion))), ("socketFD", .number(String(socketFD))),
      ("ringFD", .number(String(ringFD))), ("doorbellFD", .number(String(doorbellFD))),
      (
        "pendingOutput",
        .string(pendingOutput.map { Self.hex[Int($0 >> 4)] + Self.hex[Int($0 & 15)] }.joined())
      ),
      ("recentLines", .strings(recentLines)),
      (
        "cgroup",
        .array(
          cgroup.map {
            .object(
              JSONObject([
                ("version", .string($0.version)), ("directory", .string($0.directory)),
                ("controllers", .strings($0.controllers)),
              ]))
          })
      ),
      (
        "subscriptions",
        .array(
          subscriptions.map {
            .object(JSONObject([("id", .number(String($0.id))), ("type", .string($0.type))]))
          })
      ),
      ("messageHandler", .bool(messageHandler)), ("granted", .strings(granted)), ("calls", .strings(calls)),
      ("loadedFrom", .string(loadedFrom)), ("loadedIsSwift", .bool(loadedIsSwift)),
    ])
    o["outputFD"] = outputFD.map { .number(String($0)) } ?? .null
    o["serving"] = serving.map { .number(String($0)) } ?? .null
    o["binaryPath"] = binaryPath.map { .string($0) } ?? .null
    o["serves"] = serves.map { .string($0) } ?? .null
    o["ui"] = ui ?? .null
    return .object(o)
  }

  /// A worker's entry of the document, every member checked by type.
  static func decode(_ value: JSONValue) throws(Handover.Refusal) -> WorkerHandover {
    guard let o = value.objectValue else { throw .malformed("a worker is not an object") }
    func int(_ name: String) throws(Handover.Refusal) -> Int {
      guard let i = o[name]?.integerValue else { throw .malformed("a worker's \(name) must be an integer") }
      return i
    }
    func fd(_ name: String) throws(Handover.Refusal) -> Int32 {
      guard let n = Int32(exactly: try int(name)), n >= 0 else {
        throw .malformed("a worker's \(name) is not a descriptor")
      }
      return n
    }
    func string(_ name: String) throws(Handover.Refusal) -> String {
      guard let s = o[name]?.stringValue else { throw .malformed("a worker's \(name) must be a string") }
      return s
    }
    func strings(_ v: JSONValue?, _ name: String) throws(Handover.Refusal) -> [String] {
      guard let a = v?.arrayValue else { throw .malformed("a worker's \(name) must be an array") }
      var out: [String] = []
      for e in a {
        guard let s = e.stringValue else { throw .malformed("a worker's \(name) must hold strings") }
        out.append(s)
      }
      return out
    }
    func array(_ name: String) throws(Handover.Refusal) -> [JSONValue] {
      guard let a = o[name]?.arrayValue else { throw .malformed("a worker's \(name) must be an array") }
      return a
    }
    let hexText = Array(try string("pendingOutput").utf8)
    guard hexText.count % 2 == 0, hexText.count <= 2 * WorkerHandover.maxPending else {
      throw .malformed("a worker's pendingOutput is not hex bytes")
    }
    var pending: [UInt8] = []
    var at = 0
    while at < hexText.count {
      guard let high = Self.nibble(hexText[at]), let low = Self.nibble(hexText[at + 1]) else {
        throw .malformed("a worker's pendingOutput is not hex bytes")
      }
      pending.append(high << 4 | low)
      at += 2
    }
    var places: [CgroupPlaceHandover] = []
    for p in try array("cgroup") {
      guard let po = p.objectValue, let v = po["version"]?.stringValue, let d = po["directory"]?.stringValue
      else { throw .malformed("a worker's cgroup place is not one") }
      places.append(
        CgroupPlaceHandover(
          version: v, directory: d, controllers: try strings(po["controllers"], "controllers")))
    }
    var subscriptions: [Subscription] = []
    for s in try array("subscriptions") {
      guard let so = s.objectValue, let id = so["id"]?.integerValue, let t = so["type"]?.stringValue else {
        throw .malformed("a worker's subscription is not one")
      }
      subscriptions.append(Subscription(id: Int64(id), type: t))
    }
    guard let handler = o["messageHandler"]?.boolValue else {
      throw .malformed("a worker's messageHandler must be true or false")
    }
    var output: Int32?
    if let v = o["outputFD"], v != .null { output = try fd("outputFD") }
    var serving: Int?
    if let v = o["serving"], v != .null { serving = try int("serving") }
    var binary: String?
    if let v = o["binaryPath"], v != .null { binary = try string("binaryPath") }
    var serves: String?
    if let v = o["serves"], v != .null { serves = try string("serves") }
    let ui = o["ui"].flatMap { $0 == .null ? nil : $0 }
    return WorkerHandover(
      moduleID: try string("moduleID"), pid: Int32(clamping: try int("pid")),
      protocolVersion: try int("protocolVersion"), socketFD: try fd("socketFD"),
      ringFD: try fd("ringFD"), doorbellFD: try fd("doorbellFD"), outputFD: output, pendingOutput: pending,
      recentLines: try strings(o["recentLines"], "recentLines"), cgroup: places, subscriptions: subscriptions,
      messageHandler: handler, serving: serving, granted: try strings(o["granted"], "granted"),
      serves: serves, calls: try strings(o["calls"], "calls"), loadedFrom: try string("loadedFrom"),
      loadedIsSwift: o["loadedIsSwift"]?.boolValue ?? false, binaryPath: binary, ui: ui)
  }
}

/// A role channel as an image hands it to the next: its two ends' modules, and the host's
/// descriptor of its memory.
package struct ChannelHandover: Sendable, Equatable {
  package var consumer: String
  package var provider: String
  package var fd: Int32

  package var json: JSONValue {
    .object(
      JSONObject([
        ("consumer", .string(consumer)), ("provider", .string(provider)), ("fd", .number(String(fd))),
      ]))
  }

  static func decode(_ value: JSONValue) throws(Handover.Refusal) -> ChannelHandover {
    guard let o = value.objectValue, let c = o["consumer"]?.stringValue, let p = o["provider"]?.stringValue,
      let n = o["fd"]?.integerValue, let fd = Int32(exactly: n), fd >= 0
    else { throw .malformed("a role channel is not one") }
    return ChannelHandover(consumer: c, provider: p, fd: fd)
  }
}

/// A module's crashes so far and its pending restart, as an image hands them to the next: the
/// new image restarts it when it was due (not at once), and counts on towards quarantine.
package struct RestartHandover: Sendable, Equatable {
  package var moduleID: String
  package var crashes: Int
  /// How long until the restart was due at the handover; nil when none is pending (the module
  /// runs again, its crashes still counted).
  package var dueInMilliseconds: Int?
  package var lastFailure: String
  /// Why it does not run (the record's reason: `crashed`, `protocolViolation`).
  package var reason: String?

  package var json: JSONValue {
    var o = JSONObject([
      ("moduleID", .string(moduleID)), ("crashes", .number(String(crashes))),
      ("lastFailure", .string(lastFailure)),
    ])
    o["dueInMilliseconds"] = dueInMilliseconds.map { .number(String($0)) } ?? .null
    o["reason"] = reason.map { .string($0) } ?? .null
    return .object(o)
  }

  static func decode(_ value: JSONValue) throws(Handover.Refusal) -> RestartHandover {
    guard let o = value.objectValue, let id = o["moduleID"]?.stringValue,
      let crashes = o["crashes"]?.integerValue,
      crashes >= 0, let failure = o["lastFailure"]?.stringValue
    else { throw .malformed("a restart is not one") }
    var due: Int?
    if let v = o["dueInMilliseconds"], v != .null {
      guard let ms = v.integerValue, ms >= 0 else {
        throw .malformed("a restart's dueInMilliseconds is not one")
      }
      due = ms
    }
    let reason = o["reason"].flatMap { $0 == .null ? nil : $0.stringValue }
    return RestartHandover(
      moduleID: id, crashes: crashes, dueInMilliseconds: due, lastFailure: failure, reason: reason)
  }
}

/// What an image hands the next of its modules: the running ones' workers, the role channels
/// between them, every module's crash count and pending restart.
package struct HandedModules: Sendable, Equatable {
  package var workers: [WorkerHandover] = []
  package var channels: [ChannelHandover] = []
  package var restarts: [RestartHandover] = []

  package init(
    workers: [WorkerHandover] = [], channels: [ChannelHandover] = [], restarts: [RestartHandover] = []
  ) {
    self.workers = workers
    self.channels = channels
    self.restarts = restarts
  }
}
