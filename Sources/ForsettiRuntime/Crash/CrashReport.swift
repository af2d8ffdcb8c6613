import ForsettiCore
import Glibc

/// Where a module's worker crashed, as a vendor needs it: the signal and its cause, the address
/// it struck and which file that is in, and the crashing thread's frames, each in its file
/// (`module.so+0x1139`, with the file's build ID) with its function and `file.c:LINE` where the
/// file says (DWARF, else the nearest symbol). Written by `CrashSymbolizer` from a
/// `CrashCapture`; kept by `CrashStore`, shown by the log, `explain` and `crashes`.
package struct CrashReport: Sendable, Hashable {
  package var moduleID: String
  /// Seconds since the epoch.
  package var time: Int64
  package var signal: Int32
  package var code: Int32
  package var address: UInt64
  /// `module.so+0x0` of the faulting address, or nil when no file holds it (NULL, the heap).
  package var addressPlace: String?
  package var frames: [CrashFrame]
  /// What could not be done (no libdw, a file not symbolized), said once.
  package var notes: [String] = []

  /// "SIGSEGV (Segmentation fault)".
  package var signalName: String { "\(signalLabel) (\(String(cString: strsignal(signal))))" }

  /// What the signal's code says of its cause.
  package var cause: String {
    switch (signal, code) {
    case (_, 0): "sent by a process (kill)"
    case (_, -6): "raised by the process itself (raise, abort)"
    case (_, let c) where c < 0: "sent by the process itself"
    case (SIGSEGV, 1): "address not mapped"
    case (SIGSEGV, 2): "access not permitted by the mapping"
    case (SIGBUS, 1): "misaligned address"
    case (SIGBUS, 2): "no such physical address"
    case (SIGBUS, 3): "hardware error"
    case (SIGILL, 1): "illegal opcode (a Swift trap, ud2)"
    case (SIGILL, 2): "illegal operand"
    case (SIGFPE, 1): "integer divide by zero"
    case (SIGFPE, 2): "integer overflow"
    case (SIGFPE, 3): "floating-point divide by zero"
    case (SIGTRAP, 1): "breakpoint"
    case (SIGSYS, 1): "a system call the worker's seccomp filter refuses"
    default: "code \(code)"
    }
  }

  /// The first frame in the module's own code, else the first: where a vendor looks.
  package var topFrame: CrashFrame? { frames.first { $0.owner == .module } ?? frames.first }

  /// One line for the log: "SIGSEGV at 0x0, address not mapped, in parse_header (crashy.c:4)
  /// ← vendor_handle_packet (crashy.c:8)".
  package var summary: String {
    let at = "at 0x\(String(address, radix: 16))\(addressPlace.map { " (\($0))" } ?? "")"
    let top = frames.isEmpty ? "" : ", in \(chain)"
    return "\(signalLabel) \(at), \(cause)\(top)"
  }

  /// The frames of a log line: from the first in the module's own code (past the runtime's
  /// frames of a Swift trap or glibc's of an abort) up to where the host's code begins (the
  /// worker calling `start`), five at most — "parse_header (crashy.c:4) ← vendor_handle_packet
  /// (crashy.c:8)"; the first frame when none is the module's.
  package var chain: String {
    let fromModule = frames.drop { $0.owner != .module }
    let shown = fromModule.prefix { $0.owner != .host }.prefix(5)
    return (shown.isEmpty ? frames.prefix(1) : shown).map(\.short).joined(separator: " ← ")
  }

  /// The signal's name alone ("SIGSEGV"), the `signal` label of `forsetti_module_crashes_total`.
  package var signalLabel: String { WorkerEnding.signalName(signal) }

  /// The log record's fields (the journal's `FORSETTI_SIGNAL`, `FORSETTI_FRAMES`): the signal,
  /// and the frames, one per line, as `crashes` prints them.
  package var fields: [String: String] {
    ["signal": signalLabel, "frames": frames.prefix(16).map(\.line).joined(separator: "\n")]
  }

  /// The whole report, as `crashes` and `explain` print it (every text through the module-text
  /// rule: a function name is the vendor's).
  package var text: String {
    var lines = [
      "\(moduleID): \(signalName), \(cause)",
      "  address 0x\(String(address, radix: 16))\(addressPlace.map { " in \($0)" } ?? " (in no file)")",
    ]
    for (i, f) in frames.enumerated() { lines.append("  #\(i) \(f.line)") }
    for n in notes { lines.append("  note: \(n)") }
    return lines.map(ModuleText.visible).joined(separator: "\n")
  }

  package var json: JSONValue {
    .object(
      JSONObject([
        ("moduleID", .string(moduleID)), ("time", .number(String(time))), ("signal", .number(String(signal))),
        ("signalName", .string(signalName)), ("code", .number(String(code))), ("cause", .string(cause)),
        ("address", .string("0x\(String(address, radix: 16))")),
        ("addressPlace", .string(orNull: addressPlace)),
        ("frames", .array(frames.map(\.json))), ("notes", .strings(notes)),
      ]))
  }

  /// A report read back from its JSON (`CrashStore`); nil when it is not one.
  package init?(json v: JSONValue) {
    guard let o = v.objectValue, let id = o["moduleID"]?.stringValue, let time = o["time"]?.integerValue,
      let signal = o["signal"]?.integerValue, let code = o["code"]?.integerValue,
      let address = o["address"]?.stringValue.flatMap({ UInt64($0.dropFirst(2), radix: 16) }),
      let frames = o["frames"]?.arrayValue
    else { return nil }
    self.moduleID = id
    self.time = Int64(time)
    self.signal = Int32(truncatingIfNeeded: signal)
    self.code = Int32(truncatingIfNeeded: code)
    self.address = address
    self.addressPlace = o["addressPlace"]?.stringValue
    self.frames = frames.compactMap(CrashFrame.init(json:))
    self.notes = o["notes"]?.arrayValue?.compactMap(\.stringValue) ?? []
  }

  package init(
    moduleID: String, time: Int64, signal: Int32, code: Int32, address: UInt64, addressPlace: String?,
    frames: [CrashFrame], notes: [String] = []
  ) {
    self.moduleID = moduleID
    self.time = time
    self.signal = signal
    self.code = code
    self.address = address
    self.addressPlace = addressPlace
    self.frames = frames
    self.notes = notes
  }
}

/// One frame of a crash report.
package struct CrashFrame: Sendable, Hashable {
  /// Whose code a frame is in.
  package enum Owner: String, Sendable, Hashable {
    /// The module's file, or a library it ships.
    case module
    /// The host's: the worker, the Swift runtime.
    case host
    /// The system's libraries (glibc).
    case system
    /// No file the host knows.
    case unknown
  }

  package var pc: UInt64
  /// The file's name (`crashy.so`), or nil when no file the host knows holds the address.
  package var object: String?
  package var offset: UInt64
  package var buildID: String?
  /// The function (demangled), or nil.
  package var function: String?
  /// `crashy.c:12`, or nil without DWARF.
  package var source: String?
  /// A frame inlined into the next one (the same address).
  package var inlined = false
  package var owner: Owner

  /// "parse_header (crashy.c:12)".
  package var short: String {
    (function ?? "0x\(String(pc, radix: 16))") + (source.map { " (\($0))" } ?? "")
  }

  /// "crashy.so+0x1139 parse_header (crashy.c:12) [build-id 1a2b…] inlined", with the owner
  /// when it is not the module.
  package var line: String {
    var out = object.map { "\($0)+0x\(String(offset, radix: 16))" } ?? "0x\(String(pc, radix: 16))"
    if let function { out += " \(function)" }
    if let source { out += " (\(source))" }
    if inlined { out += " [inlined]" }
    // Not "[host]": that is the log's prefix of the host's own lines, which a frame must not look like.
    if owner == .host { out += " <host>" }
    if let buildID, !inlined { out += " build-id \(buildID)" }
    return out
  }

  package var json: JSONValue {
    .object(
      JSONObject([
        ("pc", .string("0x\(String(pc, radix: 16))")), ("object", .string(orNull: object)),
        ("offset", .string("0x\(String(offset, radix: 16))")), ("buildID", .string(orNull: buildID)),
        ("function", .string(orNull: function)), ("source", .string(orNull: source)),
        ("inlined", .bool(inlined)),
        ("owner", .string(owner.rawValue)),
      ]))
  }

  init?(json v: JSONValue) {
    guard let o = v.objectValue, let pc = o["pc"]?.stringValue.flatMap({ UInt64($0.dropFirst(2), radix: 16) })
    else { return nil }
    self.pc = pc
    object = o["object"]?.stringValue
    offset = o["offset"]?.stringValue.flatMap { UInt64($0.dropFirst(2), radix: 16) } ?? 0
    buildID = o["buildID"]?.stringValue
    function = o["function"]?.stringValue
    source = o["source"]?.stringValue
    inlined = o["inlined"]?.boolValue ?? false
    owner = o["owner"]?.stringValue.flatMap(Owner.init(rawValue:)) ?? .unknown
  }

  package init(
    pc: UInt64, object: String?, offset: UInt64, buildID: String?, function: String?, source: String?,
    inlined: Bool = false, owner: Owner
  ) {
    self.pc = pc
    self.object = object
    self.offset = offset
    self.buildID = buildID
    self.function = function
    self.source = source
    self.inlined = inlined
    self.owner = owner
  }
}
