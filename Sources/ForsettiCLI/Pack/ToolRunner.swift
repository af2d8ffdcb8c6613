import Glibc

/// What an external tool did: its exit status and everything it printed.
struct ToolRun: Sendable, Equatable {
  var status: Int32
  var stdout: String
  var stderr: String

  var succeeded: Bool { status == 0 }
}

/// How pack runs the tools it packages with (dpkg-shlibdeps, dpkg-deb, gzip, md5sum): one
/// protocol, so what a tool printed when it failed is captured and reported, and tests can
/// stand in for a tool.
protocol ToolRunner: Sendable {
  /// The tool's path on PATH, or nil when it is not installed.
  func locate(_ tool: String) -> String?
  /// Runs `tool` with `arguments` in `directory`, stdin from /dev/null, in the C locale (so
  /// what it prints can be read); waits for it.
  func run(_ tool: String, _ arguments: [String], in directory: String) -> Result<ToolRun, PackError>
}

/// Tools run as processes (posix_spawn), their output collected in unlinked temporary files,
/// which no amount of output can fill the way a pipe can.
struct SpawnedTools: ToolRunner {
  var searchPath: String

  init(searchPath: String? = nil) {
    self.searchPath = searchPath ?? getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
  }

  func locate(_ tool: String) -> String? {
    if tool.contains("/") { return access(tool, X_OK) == 0 ? tool : nil }
    for dir in searchPath.split(separator: ":") where !dir.isEmpty {
      let path = dir + "/" + tool
      if access(path, X_OK) == 0 { return path }
    }
    return nil
  }

  func run(_ tool: String, _ arguments: [String], in directory: String) -> Result<ToolRun, PackError> {
    guard let path = locate(tool) else { return .failure(.missingTools([tool])) }
    guard let out = Self.scratchFile(), let err = Self.scratchFile() else {
      return .failure(.output(path: "/tmp", reason: "cannot make a temporary file for \(tool)'s output"))
    }
    defer {
      close(out)
      close(err)
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, out, 1)
    posix_spawn_file_actions_adddup2(&actions, err, 2)
    var environment = Self.environment()
    // In `directory`: through the shell's cd, as posix_spawn_file_actions_addchdir_np is not
    // imported into Swift; the tool is then exec'd with its arguments untouched.
    let shell = ["/bin/sh", "-c", "cd \"$1\" && shift && exec \"$@\"", "sh", directory, path]
    let argv = (shell + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer {
      for p in argv { free(p) }
      for p in envp { free(p) }
      environment.removeAll()
    }
    var pid = pid_t()
    let spawned = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, envp)
    guard spawned == 0 else {
      return .failure(
        .tool(name: tool, status: -1, output: "cannot start it: \(String(cString: strerror(spawned)))"))
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    // WIFEXITED / WEXITSTATUS, which Swift does not import (macros).
    let exited = status & 0x7F == 0
    let code = exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    return .success(ToolRun(status: code, stdout: Self.contents(out), stderr: Self.contents(err)))
  }

  /// This process's environment, with LC_ALL=C: pack reads what dpkg-shlibdeps prints.
  static func environment() -> [String] {
    var out: [String] = []
    var p = environ
    while let entry = p.pointee {
      let text = String(cString: entry)
      if !text.hasPrefix("LC_ALL=") && !text.hasPrefix("LANGUAGE=") { out.append(text) }
      p += 1
    }
    return out + ["LC_ALL=C"]
  }

  static func scratchFile() -> Int32? {
    var template = Array("/tmp/forsetti-pack-out.XXXXXX".utf8CString)
    let fd = template.withUnsafeMutableBufferPointer { b in b.baseAddress.map { mkstemp($0) } ?? -1 }
    guard fd >= 0 else { return nil }
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    template.withUnsafeBufferPointer { b in _ = b.baseAddress.map { unlink($0) } }
    return fd
  }

  static func contents(_ fd: Int32) -> String {
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    var offset: off_t = 0
    while true {
      let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
      guard n > 0 else { break }
      bytes += buffer[0..<n]
      offset += off_t(n)
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}
