import ForsettiCore

/// What the worker frame fuzzer does with one input, shared by the libFuzzer target (`Fuzz/`)
/// and the regression test that replays its corpus, so both run exactly the same code.
public enum WireFuzzEntry {
  /// Reads `bytes` as the host reads a frame from a worker (and a worker the host's
  /// `configure`), and returns the properties that did not hold (none on a good run). A trap
  /// inside is a finding of its own.
  public static func run(_ bytes: [UInt8]) -> [String] {
    var broken: [String] = []
    bytes.withUnsafeBytes { raw in
      let view: WireView
      do { view = try WireView(raw) } catch {
        if (try? Wire.decode(raw)) != nil { broken.append("Wire.decode accepted what WireView refused") }
        // Bytes that are no frame are tried as a payload on their own: inside a frame, a payload
        // that changes length also needs its length prefix changed, which mutations rarely do.
        if let text = Wire.text(bytes) { broken += payload(text) }
        return
      }
      let frame: WireFrame
      do { frame = try Wire.decode(raw) } catch {
        broken.append("Wire.decode refused what WireView accepted: \(error)")
        return
      }
      // Frames have one form: whatever is accepted re-encodes to exactly the bytes read.
      if Wire.encode(frame) != bytes { broken.append("the decoded frame re-encodes to other bytes") }
      // The service readers take what they accept at its word: it must write back the same.
      if let request = ServiceRequest(view) {
        var copy = [UInt8](repeating: 0, count: Wire.maxFrame)
        let n = copy.withUnsafeMutableBytes { out -> Int? in
          var w = WireWriter(into: out, kind: .service, id: view.id)
          request.write(&w)
          return w.length
        }
        let again = n.flatMap { n in
          copy.withUnsafeBytes { try? WireView(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        .flatMap(ServiceRequest.init)
        if again?.operation != request.operation || again?.arguments != request.arguments
          || again?.capacity != request.capacity
        {
          broken.append("a service request does not survive its own writer")
        }
      }
      if let call = RoleCall(view),
        call.request.count > RoleCall.maxPayload || call.capacity > RoleCall.maxPayload
      {
        broken.append("a role call over the payload limit was accepted")
      }
      let reply = ServiceReply(view, capacity: 16)
      if reply.bytes.count > 16 { broken.append("a service reply larger than the room for it was accepted") }
      for i in 0..<view.count {
        if view.int(i) != frame.int(i) || view.string(i) != frame.string(i) {
          broken.append("value \(i) reads differently in place and copied")
        }
        guard let text = frame.string(i) else { continue }
        broken += payload(text)
      }
    }
    return broken
  }

  /// The JSON payloads the two sides read from frames: `loaded` and `confined` (host) and
  /// `configure` (worker). What they accept must survive their own writer, and the version both
  /// sides check first must read the same as the configuration read whole.
  static func payload(_ text: String) -> [String] {
    var broken: [String] = []
    if let (d, ui) = WorkerCodec.decodeLoaded(text) {
      let again = WorkerCodec.decodeLoaded(JSONWriter.string(WorkerCodec.loaded(d, ui)))
      if again?.0 != d || again?.1 != ui { broken.append("a loaded payload does not survive re-encoding") }
    }
    if let config = WorkerConfiguration(json: text),
      WorkerConfiguration(json: JSONWriter.string(config.json)) != config
    {
      broken.append("a worker configuration does not survive re-encoding")
    }
    let version = ProtocolVersion.of(json: text)
    if let config = WorkerConfiguration(json: text), version != config.protocolVersion {
      broken.append("the protocol version reads differently alone and in the configuration")
    }
    return broken
  }

  /// Real frames of each kind the host and a worker read, written by `Wire.encode`: the seed
  /// corpus of the fuzzer (`fuzz-wire --write-seeds DIR` writes them as files).
  public static var seeds: [(name: String, bytes: [UInt8])] {
    let descriptor = ModuleDescriptor(
      moduleID: "com.example.dashboard", moduleType: .ui,
      moduleVersion: SemanticVersion(1, 2, 3, prerelease: "beta.1"))
    let ui = UIContributions(
      themeMask: ThemeMask(themeID: "night", tokens: ["accent": "#ff8800", "background": "#101010"]),
      toolbarItems: [ToolbarItem(itemID: "open", title: "Öffnen", actionRouteID: "main")],
      viewInjections: [ViewInjection(viewID: "panel", slotID: "sidebar", priority: -3)],
      overlay: OverlaySchema(routes: ["main"], pointers: ["cursor"]))
    var limits = ResourceLimits()
    limits.memoryBytes = 1 << 30
    limits.cpuSeconds = 30
    let config = WorkerConfiguration(
      moduleID: "com.example.counter", library: "/opt/forsetti/plugins/libcounter.so",
      entryPoint: "forsetti_counter_entry", isSwift: false, sandbox: "/var/lib/forsetti/sandbox/counter",
      granted: [.storage, .telemetry],
      policy: ConfinementPolicy(
        readExecute: ["/opt/forsetti/plugins"], readWrite: ["/var/lib/forsetti/sandbox/counter"],
        networking: true,
        limits: limits),
      parent: 4242)
    let frames: [(String, WireFrame)] = [
      ("configure", WireFrame(.configure, [.string(JSONWriter.string(config.json))])),
      (
        "confined",
        WireFrame(
          .confined,
          [
            .string(
              #"{"protocolVersion":\#(ProtocolVersion.current),"capabilitiesDropped":true,"namespaces":["user","ipc","uts"],"landlockABI":6,"seccomp":true}"#
            )
          ])
      ),
      ("loaded-ui", WireFrame(.loaded, [.string(JSONWriter.string(WorkerCodec.loaded(descriptor, ui)))])),
      (
        "loaded-service",
        WireFrame(.loaded, [.string(JSONWriter.string(WorkerCodec.loaded(descriptor, nil)))])
      ),
      (
        "load-failed",
        WireFrame(.loadFailed, [.string("dlopen: libmissing.so: cannot open shared object file")])
      ),
      ("start-result", WireFrame(.startResult, id: 1, [.int(0)])),
      ("log", WireFrame(.log, [.int(2), .string("counter at 41")])),
      ("publish", WireFrame(.publish, id: 9, [.string("counter.tick"), .bytes([0, 1, 2, 0xFF])])),
      ("send", WireFrame(.send, id: 10, [.string("com.example.dashboard"), .string("ping"), .bytes([7])])),
      ("response", WireFrame(.response, id: 10, [.int(-1), .bytes([])])),
      ("state-saved", WireFrame(.stateSaved, [.bytes(Array("{\"count\":41}".utf8))])),
      ("stop", WireFrame(.stop)),
      (
        "service-role-call",
        WireFrame(
          .service, id: 11,
          [.int(ServiceOperation.roleCall.rawValue), .int(4096), .int(1), .string("get"), .bytes([1, 2, 3])])
      ),
      (
        "service-crypto-verify",
        WireFrame(
          .service, id: 12,
          [
            .int(ServiceOperation.cryptoVerify.rawValue), .int(0), .int(0), .bytes([9]),
            .bytes(Array(repeating: 1, count: 64)),
            .bytes(Array(repeating: 2, count: 32)),
          ])
      ),
      ("role-channel", WireFrame(.roleChannel, [.int(0), .string("com.example.notes")])),
      ("service-reply", WireFrame(.response, id: 11, [.int(0), .int(3), .bytes([4, 5, 6])])),
      (
        "serve-call",
        WireFrame(
          .serveCall, id: 1,
          [.int(65536), .string("com.example.notes"), .string("put"), .bytes([0x7B, 0x7D])])
      ),
    ]
    // The JSON payloads alone as well, for the path above that reads unframed bytes as one.
    let payloads = [
      ("configure.json", JSONWriter.string(config.json)),
      // Only the members a worker cannot do without: short, so mutations land on them.
      (
        "configure-minimal.json", #"{"moduleID":"m","library":"l","entryPoint":"e","sandbox":"s","parent":1}"#
      ),
      ("loaded-ui.json", JSONWriter.string(WorkerCodec.loaded(descriptor, ui))),
    ]
    return frames.map { ($0.0, Wire.encode($0.1)) } + payloads.map { ($0.0, Array($0.1.utf8)) }
  }
}
