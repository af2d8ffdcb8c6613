/// What ELF inspection learned about a file, without loading it.
public struct ELFFacts: Sendable, Hashable {
  public var path: String
  public var fileSize: Int
  public var elfClass: ELFClass
  public var machine: ELFMachine
  /// `ET_DYN` for shared objects.
  public var isSharedObject: Bool
  /// Every named symbol of `.dynsym`.
  public var dynamicSymbols: [DynamicSymbol]
  /// The content of a `.forsetti.manifest` section, when the module embeds its manifest.
  public var embeddedManifest: [UInt8]?
  /// `DT_NEEDED` entries: the libraries the dynamic loader will have to find.
  public var neededLibraries: [String]

  /// The symbols a host can call as an entry point: defined, global or weak, default or
  /// protected visibility, functions.
  public var exportedFunctions: [String] {
    dynamicSymbols.filter(\.isExportedFunction).map(\.name)
  }

  public func symbol(named name: String) -> DynamicSymbol? { dynamicSymbols.first { $0.name == name } }

  /// Whether this file could be loaded by this host (class and machine match).
  public var matchesHost: Bool { elfClass == .host && machine == .host }
}

/// One `.dynsym` entry.
public struct DynamicSymbol: Sendable, Hashable {
  public enum Kind: String, Sendable { case function, object, other }
  public enum Binding: String, Sendable { case local, global, weak, other }

  public var name: String
  public var kind: Kind
  public var binding: Binding
  /// False for an import (`SHN_UNDEF`).
  public var isDefined: Bool
  /// False for hidden or internal visibility.
  public var isVisible: Bool

  public var isExportedFunction: Bool {
    kind == .function && isDefined && isVisible && (binding == .global || binding == .weak)
  }

  /// Why this symbol cannot serve as an entry point, or nil when it can.
  public var entryPointProblem: String? {
    if !isDefined { return "it is only imported (undefined), not defined here" }
    if kind != .function { return "it is a \(kind.rawValue), not a function" }
    if binding != .global && binding != .weak { return "it has \(binding.rawValue) binding, not global" }
    if !isVisible { return "it has hidden visibility" }
    return nil
  }
}

/// ELF class: 32- or 64-bit.
public enum ELFClass: String, Sendable, Hashable {
  case elf32 = "ELF32"
  case elf64 = "ELF64"

  public static var host: ELFClass { MemoryLayout<Int>.size == 8 ? .elf64 : .elf32 }
}

/// ELF machine (`e_machine`), named for the common ones.
public struct ELFMachine: Sendable, Hashable, CustomStringConvertible {
  public var rawValue: UInt16

  public init(rawValue: UInt16) { self.rawValue = rawValue }

  public static let x86 = ELFMachine(rawValue: 3)
  public static let arm = ELFMachine(rawValue: 40)
  public static let x86_64 = ELFMachine(rawValue: 62)
  public static let aarch64 = ELFMachine(rawValue: 183)
  public static let riscv = ELFMachine(rawValue: 243)

  public static var host: ELFMachine {
    #if arch(x86_64)
      .x86_64
    #elseif arch(arm64)
      .aarch64
    #elseif arch(i386)
      .x86
    #elseif arch(arm)
      .arm
    #else
      .riscv
    #endif
  }

  public var description: String {
    switch self {
    case .x86: "x86"
    case .arm: "arm"
    case .x86_64: "x86-64"
    case .aarch64: "aarch64"
    case .riscv: "riscv"
    default: "machine \(rawValue)"
    }
  }
}
