import ForsettiBinary

/// The Debian architecture of a binary, read from its ELF header (class and machine) as
/// `dpkg --print-architecture` names it: the module's, never the machine that packs it.
enum DebianArchitecture {
  static func of(_ elfClass: ELFClass, _ machine: ELFMachine) -> String? {
    switch (elfClass, machine.rawValue) {
    case (.elf64, ELFMachine.x86_64.rawValue): "amd64"
    case (.elf64, ELFMachine.aarch64.rawValue): "arm64"
    case (.elf32, ELFMachine.x86.rawValue): "i386"
    // EM_ARM is armel too; Debian's 32-bit ARM release architecture is the hard-float one.
    case (.elf32, ELFMachine.arm.rawValue): "armhf"
    case (.elf64, ELFMachine.riscv.rawValue): "riscv64"
    // EM_S390: on Debian only s390x (64-bit, big-endian).
    case (.elf64, 22): "s390x"
    default: nil
    }
  }
}
