import CForsettiSys
import CSeccomp
import Glibc

/// `SyscallPolicy` compiled to a classic BPF seccomp program. Written by hand rather than by
/// libseccomp because libseccomp cannot compare one argument twice in a rule, and "pid 0 or my
/// own pid" needs exactly that.
package struct SeccompFilter: Sendable {
  /// The program as the kernel reads it: `struct sock_filter`, 8 bytes each.
  package private(set) var bytes: [UInt8] = []
  package private(set) var count = 0
  /// Rules that applied, and the distinct calls they name (resolved on this architecture).
  package private(set) var ruleCount = 0
  package private(set) var callCount = 0

  /// Why a policy could not become a program.
  package enum CompileError: Error, Sendable, Hashable {
    case blockTooLong(call: String, instructions: Int)
    case programTooLong(instructions: Int)
    /// The pid changed more than the constants compared with it (`SeccompTemplate`).
    case pidShapesProgram
  }

  // Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
  static let loadWord: UInt16 = 0x20  // BPF_LD | BPF_W | BPF_ABS
  static let jumpEqual: UInt16 = 0x15  // BPF_JMP | BPF_JEQ | BPF_K
  static let jumpGreaterOrEqual: UInt16 = 0x35  // BPF_JMP | BPF_JGE | BPF_K
  static let jumpAlways: UInt16 = 0x05  // BPF_JMP | BPF_JA
  static let andConstant: UInt16 = 0x54  // BPF_ALU | BPF_AND | BPF_K
  static let returnConstant: UInt16 = 0x06  // BPF_RET | BPF_K
  static let allow: UInt32 = 0x7fff_0000
  static func refuse(_ errno: Int32) -> UInt32 { 0x0005_0000 | (UInt32(truncatingIfNeeded: errno) & 0xffff) }
  static let x86_64: UInt32 = 0xc000_003e
  /// x32 system calls arrive under the x86-64 arch with this bit set in their number.
  static let x32Bit: UInt32 = 0x4000_0000

  private struct Instruction {
    var code: UInt16
    var jt: UInt8 = 0
    var jf: UInt8 = 0
    var k: UInt32
  }

  /// Offsets in `struct seccomp_data`: nr, arch, then six 64-bit arguments from byte 16.
  static func low(_ arg: Int) -> UInt32 {
    #if _endian(big)
      UInt32(16 + 8 * arg + 4)
    #else
      UInt32(16 + 8 * arg)
    #endif
  }
  static func high(_ arg: Int) -> UInt32 {
    #if _endian(big)
      UInt32(16 + 8 * arg)
    #else
      UInt32(16 + 8 * arg + 4)
    #endif
  }

  /// Compiles the rules for a process whose pid is `ownPID`. Calls that do not exist on this
  /// architecture (libseccomp cannot resolve them) need no rule.
  package init(rules: [SyscallPolicy.Rule], ownPID: Int32) throws(CompileError) {
    var order: [Int32] = []
    var byCall: [Int32: (name: String, checks: [Instruction])] = [:]
    for rule in rules {
      for name in rule.calls {
        let nr = Self.number(of: name)
        guard nr >= 0 else { continue }
        if byCall[nr] == nil {
          order.append(nr)
          byCall[nr] = (name, [])
        }
        byCall[nr]?.checks += Self.checks(rule.refusal, errno: rule.errno, ownPID: ownPID)
      }
      ruleCount += 1
    }
    callCount = order.count
    let arch = seccomp_arch_native()
    var program: [Instruction] = [
      Instruction(code: Self.loadWord, k: 4),
      Instruction(code: Self.jumpEqual, jt: 1, jf: 0, k: arch),
      Instruction(code: Self.returnConstant, k: Self.refuse(ENOSYS)),
      Instruction(code: Self.loadWord, k: 0),
    ]
    if arch == Self.x86_64 {
      program += [
        Instruction(code: Self.jumpGreaterOrEqual, jt: 0, jf: 1, k: Self.x32Bit),
        Instruction(code: Self.returnConstant, k: Self.refuse(ENOSYS)),
      ]
    }
    program += [
      Instruction(code: Self.jumpGreaterOrEqual, jt: 0, jf: 1, k: SyscallPolicy.firstUnjudgedCall),
      Instruction(code: Self.returnConstant, k: Self.refuse(ENOSYS)),
    ]
    let groups = order.sorted().compactMap { nr in
      byCall[nr].map { Group(nr: nr, name: $0.name, checks: $0.checks) }
    }
    program += try Self.search(groups[...])
    guard program.count <= 4096 else { throw .programTooLong(instructions: program.count) }
    count = program.count
    for i in program {
      withUnsafeBytes(of: i.code) { bytes += $0 }
      bytes += [i.jt, i.jf]
      withUnsafeBytes(of: i.k) { bytes += $0 }
    }
  }

  /// Calls numbered from 424 (Linux 5.1) on have one number on every architecture; these are
  /// the ones an older libseccomp may not know (Debian 12's 2.5.4 resolves neither setxattrat nor
  /// removexattrat), which would otherwise leave their rules out without a word.
  static let sharedNumbers: [String: Int32] = [
    "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442,
    "quotactl_fd": 443, "memfd_secret": 447, "process_mrelease": 448, "fchmodat2": 452, "setxattrat": 463,
    "removexattrat": 466, "open_tree_attr": 467, "file_setattr": 469,
  ]

  /// The call's number on this architecture, or a negative number when it has none here.
  static func number(of name: String) -> Int32 {
    let nr = seccomp_syscall_resolve_name(name)
    return nr >= 0 ? nr : sharedNumbers[name] ?? nr
  }

  private struct Group {
    var nr: Int32
    var name: String
    var checks: [Instruction]
  }

  /// A binary search over the sorted call numbers, with short linear runs at the leaves: a call
  /// the policy does not name (most calls) costs about 2·log2(n) instructions, not 2·n. A jump
  /// offset holds 8 bits, so each branch to the upper half goes through a `ja` (32 bits).
  private static func search(_ groups: ArraySlice<Group>) throws(CompileError) -> [Instruction] {
    guard groups.count > 4 else {
      var out: [Instruction] = []
      for g in groups {
        let block = g.checks + [Instruction(code: returnConstant, k: allow)]
        guard block.count <= 255 else { throw .blockTooLong(call: g.name, instructions: block.count) }
        out.append(Instruction(code: jumpEqual, jt: 0, jf: UInt8(block.count), k: UInt32(bitPattern: g.nr)))
        out += block
      }
      out.append(Instruction(code: returnConstant, k: allow))
      return out
    }
    let mid = groups.startIndex + groups.count / 2
    let lower = try search(groups[..<mid])
    let upper = try search(groups[mid...])
    return [
      Instruction(code: jumpGreaterOrEqual, jt: 0, jf: 1, k: UInt32(bitPattern: groups[mid].nr)),
      Instruction(code: jumpAlways, k: UInt32(lower.count)),
    ] + lower + upper
  }

  /// The instructions of one refusal; each falls through to the next when the call passes.
  private static func checks(_ refusal: SyscallPolicy.Refusal, errno: Int32, ownPID: Int32) -> [Instruction] {
    let no = Instruction(code: returnConstant, k: refuse(errno))
    switch refusal {
    case .always:
      return [no]
    case .whenMasked(let arg, let mask, let value):
      return [
        Instruction(code: loadWord, k: low(arg)), Instruction(code: andConstant, k: mask),
        Instruction(code: jumpEqual, jt: 0, jf: 1, k: value), no,
      ]
    case .when(let arg, let value, let then):
      let inner = checks(then, errno: errno, ownPID: ownPID)
      return [
        Instruction(code: loadWord, k: low(arg)),
        Instruction(code: jumpEqual, jt: 0, jf: UInt8(clamping: inner.count), k: value),
      ] + inner
    case .unlessSelf(let arg, let zeroIsSelf):
      let pid = UInt64(UInt32(bitPattern: ownPID))
      return checks(.unlessOneOf(arg: arg, zeroIsSelf ? [0, pid] : [pid]), errno: errno, ownPID: ownPID)
    case .unlessOneOf(let arg, let values):
      // The high word must be 0 (no allowed value needs more), then the low word one of them.
      let small = values.filter { $0 <= UInt64(UInt32.max) }.prefix(200)
      var out = [
        Instruction(code: loadWord, k: high(arg)), Instruction(code: jumpEqual, jt: 1, jf: 0, k: 0), no,
        Instruction(code: loadWord, k: low(arg)),
      ]
      for (i, v) in small.enumerated() {
        out.append(Instruction(code: jumpEqual, jt: UInt8(small.count - i), jf: 0, k: UInt32(v)))
      }
      out.append(no)
      return out
    }
  }

  /// Writes `k` into the 32-bit fields at `offsets` (a `SeccompTemplate`'s pid slots).
  mutating func patch(_ offsets: [Int], to k: UInt32) {
    for at in offsets where at + 4 <= bytes.count {
      withUnsafeBytes(of: k) { bytes.replaceSubrange(at..<at + 4, with: $0) }
    }
  }

  /// Installs the program on the calling thread (and threads it starts); no_new_privs must be set.
  package func install() -> Int32 {
    bytes.withUnsafeBytes { forsetti_install_bpf_filter($0.baseAddress, UInt16(truncatingIfNeeded: count)) }
  }
}
