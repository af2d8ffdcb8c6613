import ForsettiBinary
import ForsettiCore
import ForsettiRuntime
import FoundationEssentials
import Glibc

/// Stages a plan under `WORK/debian/PACKAGE` (where dpkg-shlibdeps expects a package's root,
/// as scripts/package does), checks the signature on the staged bytes, asks dpkg-shlibdeps for
/// the libraries' packages, writes md5sums and the control file, and builds the `.deb` with
/// `dpkg-deb --root-owner-group -Zxz`. The module's files are copied, never changed.
struct DebianPackageBuilder {
  var tools: any ToolRunner

  /// The tools pack cannot do without, and the package that has them.
  static let requiredTools = ["dpkg-deb", "dpkg-shlibdeps"]

  /// What was built.
  struct Built: Sendable {
    var deb: String
    var control: DebianControl
    var files: [(path: String, mode: UInt16, size: Int)]
    /// What the signature check found, in a sentence; nil when unsigned.
    var signature: String?
  }

  func checkTools() throws(PackError) {
    let missing = Self.requiredTools.filter { tools.locate($0) == nil }
    guard missing.isEmpty else { throw .missingTools(missing) }
  }

  func build(_ plan: PackagePlan, _ inputs: PackInputs, into out: String) throws(PackError) -> Built {
    try checkTools()
    // dpkg-deb runs in the staging directory: a relative --out (the default, ".") would be
    // taken from there.
    let outDirectory = out.hasPrefix("/") ? out : PathText.join(FileManager.default.currentDirectoryPath, out)
    guard PackInputs.isDirectory(outDirectory), access(outDirectory, W_OK) == 0 else {
      throw .output(path: outDirectory, reason: "is not a directory this user can write")
    }
    let work = try Self.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    let root = "\(work)/debian/\(plan.package)"
    try Self.directory(work + "/debian")
    try Self.directory(root)
    for entry in plan.entries { try stage(entry, root: root) }
    let signature = try checkSignature(plan, inputs, root: root)

    // dpkg-shlibdeps reads debian/control and finds a binary's package by the DEBIAN above it.
    try Self.directory(root + "/DEBIAN")
    try Self.write(
      "Source: \(plan.package)\n\nPackage: \(plan.package)\nArchitecture: \(plan.architecture)\n",
      to: work + "/debian/control")
    let shlibs = try run(
      "dpkg-shlibdeps", SharedLibraryDependencies.arguments(binary: "debian/\(plan.package)\(plan.library)"),
      in: work, mayFail: true)
    let libraryDepends: [String]
    switch SharedLibraryDependencies.read(stdout: shlibs.stdout, stderr: shlibs.stderr) {
    case .unpackaged(let library, let at):
      throw .unpackagedLibrary(
        library: library, foundAt: at, module: inputs.libraryFileName,
        swift: SharedLibraryDependencies.isSwiftRuntime(library))
    case .depends(let d):
      guard shlibs.succeeded else {
        throw .tool(
          name: "dpkg-shlibdeps", status: shlibs.status,
          output: Self.withoutDebug(shlibs.stdout + shlibs.stderr))
      }
      libraryDepends = d
    }
    try? FileManager.default.removeItem(atPath: work + "/debian/control")

    let paths = plan.entries.map(\.path).sorted()
    let relative = paths.map { String($0.dropFirst()) }
    let sums = try run("md5sum", ["--"] + relative, in: root)
    try Self.write(sums.stdout, to: root + "/DEBIAN/md5sums")
    var files: [(path: String, mode: UInt16, size: Int)] = []
    var kib = 0
    for path in paths {
      var st = stat()
      guard stat(root + path, &st) == 0 else {
        throw .output(path: root + path, reason: "vanished while packing")
      }
      files.append((path, UInt16(st.st_mode & 0o7777), Int(st.st_size)))
      kib += max(1, (Int(st.st_size) + 1023) / 1024)
    }
    kib += Self.directories(of: paths).count
    let control = plan.control(libraryDepends: libraryDepends, installedSizeKiB: kib)
    try Self.write(control.text, to: root + "/DEBIAN/control")

    let deb = PathText.join(outDirectory, plan.debName)
    let partial = PathText.join(outDirectory, "." + plan.debName + ".part")
    _ = try run("dpkg-deb", ["--root-owner-group", "-Zxz", "--build", root, partial], in: work)
    guard rename(partial, deb) == 0 else {
      unlink(partial)
      throw .output(path: deb, reason: "cannot be written: \(String(cString: strerror(errno)))")
    }
    return Built(deb: deb, control: control, files: files, signature: signature)
  }

  /// Copies or writes one file into the package root, mode 0644, its directories 0755.
  func stage(_ entry: PackagePlan.Entry, root: String) throws(PackError) {
    let path = root + entry.path
    for dir in Self.directories(of: [entry.path]) { try Self.directory(root + dir) }
    switch entry.content {
    case .copy(let from):
      guard let bytes = PlainFiles.contents(of: from) else {
        throw .file(option: "pack", path: from, reason: "cannot be read")
      }
      try Self.write(bytes, to: path)
    case .text(let text):
      try Self.write(text, to: path)
    case .gzipped(let text):
      let plain = String(path.dropLast(".gz".count))
      try Self.write(text, to: plain)
      _ = try run("gzip", ["-9n", "--", plain], in: PathText.parent(plain))
    }
    guard chmod(path, mode_t(entry.mode)) == 0 else {
      throw .output(path: path, reason: "chmod: \(String(cString: strerror(errno)))")
    }
  }

  /// The signature as the host will read it: the staged `.sig` beside the staged library, with
  /// the shipped key (when given) the one trusted. A signature file that is not one, or one by
  /// that key that does not match the bytes, is refused; any other key cannot be checked here.
  func checkSignature(_ plan: PackagePlan, _ inputs: PackInputs, root: String) throws(PackError) -> String? {
    guard let sig = inputs.signaturePath else { return nil }
    var trusted: [String: [UInt8]] = [:]
    if let key = inputs.publicKey { trusted[Signatures.keyID(key)] = key }
    switch SignatureFinding.read(binary: root + plan.library, trusted: trusted) {
    case .valid(let k): return "signature \(sig) verified with the shipped key \(k)"
    case .untrustedKey(let k):
      return inputs.publicKey == nil
        ? "signature \(sig) by key \(k), not checked (pass --public-key to ship and check the vendor's key)"
        : "signature \(sig) by key \(k), not the shipped key; not checked"
    case .mismatch(let k):
      throw .signature(
        path: sig,
        detail:
          "the signature by key \(k) does not match \(inputs.libraryPath): the library changed after it was signed"
      )
    case .malformed(let why):
      throw .signature(path: sig, detail: why.replacing(root + plan.library + ".sig", with: sig))
    case .unsigned, .unreadable: throw .signature(path: sig, detail: "cannot be read")
    }
  }

  func run(_ tool: String, _ arguments: [String], in directory: String, mayFail: Bool = false)
    throws(PackError)
    -> ToolRun
  {
    let result = tools.run(tool, arguments, in: directory)
    switch result {
    case .failure(let e): throw e
    case .success(let r):
      guard r.succeeded || mayFail else {
        throw .tool(name: tool, status: r.status, output: (r.stderr + r.stdout).trimmed())
      }
      return r
    }
  }

  /// Every directory above `paths` (absolute), parents first, `/` left out.
  static func directories(of paths: [String]) -> [String] {
    var out: [String] = []
    var seen = Set<String>()
    for path in paths {
      var parts = path.split(separator: "/").dropLast().map(String.init)[...]
      var dir = ""
      while let part = parts.popFirst() {
        dir += "/" + part
        if seen.insert(dir).inserted { out.append(dir) }
      }
    }
    return out
  }

  /// dpkg-shlibdeps' messages without its `-v` account of every library.
  static func withoutDebug(_ text: String) -> String {
    text.split(separator: "\n").filter { !$0.contains(": debug: ") }.joined(separator: "\n")
  }

  static func temporaryDirectory() throws(PackError) -> String {
    let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array(PathText.join(base, "forsetti-pack.XXXXXX").utf8CString)
    let made = template.withUnsafeMutableBufferPointer { b in
      b.baseAddress.map { mkdtemp($0) != nil } ?? false
    }
    guard made else {
      throw .output(
        path: base, reason: "cannot make a temporary directory: \(String(cString: strerror(errno)))")
    }
    return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  static func directory(_ path: String) throws(PackError) {
    if mkdir(path, 0o755) != 0 && errno != EEXIST {
      throw .output(path: path, reason: "cannot be made: \(String(cString: strerror(errno)))")
    }
    guard chmod(path, 0o755) == 0 else {
      throw .output(path: path, reason: "chmod: \(String(cString: strerror(errno)))")
    }
  }

  static func write(_ text: String, to path: String) throws(PackError) {
    try write(Array(text.utf8), to: path)
  }

  static func write(_ bytes: [UInt8], to path: String) throws(PackError) {
    do { try AtomicFile.write(bytes, to: path, mode: 0o644, durable: false) } catch {
      throw .output(path: path, reason: "cannot be written: \(error)")
    }
  }
}
