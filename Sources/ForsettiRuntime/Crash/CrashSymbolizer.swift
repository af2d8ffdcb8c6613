import CForsettiDebug
import ForsettiBinary
import ForsettiBridge
import ForsettiCore
import Glibc

/// Turns a worker's `CrashCapture` into a `CrashReport`, in the host, from the files: libdwfl
/// unwinds the captured stack with each file's CFI and names each frame's function and line
/// (DWARF, inlined frames too, else the nearest symbol), Swift names demangled. Only files the
/// host itself knows are read (`Files`): the module's path as it loaded it, the libraries its
/// resolution found, the worker, the system's library directories — never a path the worker's
/// record names alone, which would let a module point the host's DWARF reader at any file.
enum CrashSymbolizer {
  /// Frames kept at most.
  static let maxFrames = 48

  /// The files a crash may be symbolized from, and whose each is.
  struct Files: Sendable {
    /// The module's file as the worker loaded it.
    var module: String
    /// The directories of the libraries it ships (found through its own search paths, granted
    /// to its worker): a file there is the module's.
    var moduleDirectories: [String]
    /// The worker executable.
    var worker: String
    /// Directories of system and toolchain libraries (read, never the module's own).
    var libraryDirectories: [String]

    /// Whose `path` is (as the worker's record names it) and the file to read for it, or nil
    /// when it is no file the host knows. A library the module ships is named by the link in
    /// its version copy's directory (`VersionCopies.originMirror`): it is judged by where that
    /// link leads, and that file is read.
    func owner(_ path: String) -> (owner: CrashFrame.Owner, file: String)? {
      if path == module { return (.module, path) }
      if path == worker { return (.host, path) }
      let real = LibraryResolver.realPath(path) ?? path
      let dir = PathText.parent(real)
      let name = real.split(separator: "/").last.map(String.init) ?? real
      let granted = moduleDirectories.contains(dir)
      let library = libraryDirectories.contains { dir == $0 || dir.hasPrefix($0 + "/") }
      guard granted || library else { return nil }
      // The Swift runtime is the host's, even where a module's library found it by its own path.
      let runtime = ["libswift", "libFoundation", "lib_FoundationICU", "libdispatch", "libBlocksRuntime"]
      if runtime.contains(where: { name.hasPrefix($0) }) { return (.host, real) }
      return (granted ? .module : .system, real)
    }
  }

  static func symbolize(_ c: CrashCapture, moduleID: String, files: Files, time: Int64) -> CrashReport {
    var report = CrashReport(
      moduleID: moduleID, time: time, signal: c.signal, code: c.code, address: c.address, addressPlace: nil,
      frames: [])
    // The files the record names that the host knows, at the biases the record gives.
    var known: [(bias: UInt64, path: String, owner: CrashFrame.Owner)] = []
    for o in c.objects {
      guard let (owner, file) = files.owner(o.path) else { continue }
      known.append((o.bias, file, owner))
    }
    guard let dwfl = forsetti_debug_begin() else {
      report.notes.append(
        "\(String(cString: forsetti_debug_library())) (Debian package libdw1) could not be opened: frames are addresses only"
      )
      report.frames = [
        CrashFrame(
          pc: c.pc, object: nil, offset: 0, buildID: nil, function: nil, source: nil, owner: .unknown)
      ]
      return report
    }
    defer { forsetti_debug_end(dwfl) }
    var reported: [String: CrashFrame.Owner] = [:]
    for k in known where reported[k.path] == nil {
      if forsetti_debug_report(dwfl, k.path, k.bias) == 0 { reported[k.path] = k.owner }
    }
    forsetti_debug_report_end(dwfl)
    var pcs = [UInt64](repeating: 0, count: maxFrames)
    var activation = [UInt8](repeating: 0, count: maxFrames)
    let count: Int32 = c.registers.withUnsafeBufferPointer { regs in
      c.stack.withUnsafeBufferPointer { stack in
        guard let r = regs.baseAddress, regs.count == 17 else { return 0 }
        return forsetti_debug_unwind(
          dwfl, r, c.stackStart, stack.baseAddress, stack.count, &pcs, &activation, Int32(maxFrames))
      }
    }
    for i in 0..<Int(max(0, min(count, Int32(maxFrames)))) {
      // A return address is one past its call: looked up one byte back, shown as it is.
      let lookup = activation[i] != 0 ? pcs[i] : pcs[i] &- 1
      report.frames += frames(at: lookup, pc: pcs[i], dwfl, reported)
    }
    var place = forsetti_debug_place()
    forsetti_debug_lookup(dwfl, c.address, &place)
    if let file = place.file.map({ String(cString: $0) }) {
      report.addressPlace =
        "\(ModuleText.visible(basename(file)))+0x\(String(c.address &- place.bias, radix: 16))"
    }
    return report
  }

  /// The frames at one address: the inlined functions there, innermost first, then the one
  /// they are inlined into.
  private static func frames(
    at address: UInt64, pc: UInt64, _ dwfl: OpaquePointer, _ owners: [String: CrashFrame.Owner]
  )
    -> [CrashFrame]
  {
    var p = forsetti_debug_place()
    forsetti_debug_lookup(dwfl, address, &p)
    guard let file = p.file.map({ String(cString: $0) }) else {
      return [
        CrashFrame(pc: pc, object: nil, offset: 0, buildID: nil, function: nil, source: nil, owner: .unknown)
      ]
    }
    let owner = owners[file] ?? .unknown
    // Every name below is the vendor's file's (its path, its symbols, its DWARF): made visible by
    // the module-text rule once, here, so no output of the report can carry a raw control.
    let object = ModuleText.visible(basename(file))
    let offset = pc &- p.bias
    let buildID = withUnsafeBytes(of: p.build_id) { bytes in
      p.build_id_length > 0
        ? bytes.prefix(Int(min(p.build_id_length, 64))).map { String(format2: $0) }.joined() : nil
    }
    let symbol = p.symbol.map { ModuleText.visible(demangled(String(cString: $0))) }
    let source = p.source.map { ModuleText.visible("\(basename(String(cString: $0))):\(p.line)") }
    let inlineCount = Int(max(0, min(p.inline_count, FORSETTI_DEBUG_INLINES)))
    guard inlineCount > 1 else {
      let function =
        inlineCount == 1
        ? withInline(p, 0).function.map { ModuleText.visible(demangled($0)) } ?? symbol : symbol
      return [
        CrashFrame(
          pc: pc, object: object, offset: offset, buildID: buildID, function: function, source: source,
          owner: owner)
      ]
    }
    // The innermost function is at the address's own line; each outer one at the line where
    // it called the one inside it.
    var out: [CrashFrame] = []
    var line = source
    for k in 0..<inlineCount {
      let (function, callFile, callLine) = withInline(p, k)
      out.append(
        CrashFrame(
          pc: pc, object: object, offset: offset, buildID: buildID,
          function: function.map { ModuleText.visible(demangled($0)) } ?? symbol,
          source: line, inlined: k < inlineCount - 1, owner: owner))
      line = callFile.map { ModuleText.visible("\(basename($0)):\(callLine)") }
    }
    return out
  }

  private static func withInline(_ p: forsetti_debug_place, _ k: Int) -> (
    function: String?, callFile: String?, callLine: Int32
  ) {
    var copy = p
    return withUnsafeBytes(of: &copy.inline_function) { functions in
      withUnsafeBytes(of: &copy.inline_call_file) { files in
        withUnsafeBytes(of: &copy.inline_call_line) { lines in
          let f = functions.load(
            fromByteOffset: k * MemoryLayout<UnsafePointer<CChar>?>.stride, as: UnsafePointer<CChar>?.self)
          let c = files.load(
            fromByteOffset: k * MemoryLayout<UnsafePointer<CChar>?>.stride, as: UnsafePointer<CChar>?.self)
          let l = lines.load(fromByteOffset: k * MemoryLayout<Int32>.stride, as: Int32.self)
          return (f.map { String(cString: $0) }, c.map { String(cString: $0) }, l)
        }
      }
    }
  }

  static func basename(_ path: String) -> String { path.split(separator: "/").last.map(String.init) ?? path }

  /// A Swift name demangled by the Swift runtime (`swift_demangle`); any other as it is.
  static func demangled(_ name: String) -> String {
    guard name.hasPrefix("$s") || name.hasPrefix("_$s") || name.hasPrefix("$S") || name.hasPrefix("_T0")
    else {
      return name
    }
    guard let out = name.withCString({ _swiftDemangle($0, strlen($0), nil, nil, 0) }) else { return name }
    defer { free(out) }
    return String(cString: out)
  }
}

@_silgen_name("swift_demangle")
private func _swiftDemangle(
  _ mangled: UnsafePointer<CChar>?, _ length: Int, _ output: UnsafeMutablePointer<CChar>?,
  _ outputSize: UnsafeMutablePointer<Int>?, _ flags: UInt32
) -> UnsafeMutablePointer<CChar>?

extension String {
  /// Two lowercase hex digits.
  fileprivate init(format2 byte: UInt8) {
    let digits = Array("0123456789abcdef")
    self = String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
  }
}
