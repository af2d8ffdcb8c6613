import ForsettiCore

/// Why a module that passed every pre-load gate could not be loaded. Carries the reason code
/// and what was found.
public enum LoadError: Error, Sendable, Hashable, CustomStringConvertible {
  /// dlopen or dlsym failed; the text is dlerror's.
  case dlopenFailed(path: String, dlerror: String)
  case symbolMissing(symbol: String, dlerror: String)
  /// The entry point returned NULL: the module refused this host.
  case refused(symbol: String, hostABI: UInt32)
  case abiUnsupported(moduleABI: UInt32, hostABI: UInt32)
  case tableTooSmall(size: UInt32, needed: Int)
  case descriptorInvalid(String)
  case uiContributionsInvalid(String)
  /// The table is the right size and version but unusable (NULL start or stop).
  case tableInvalid(String)

  public var reason: ReasonCode {
    switch self {
    case .abiUnsupported, .tableTooSmall: .abiUnsupported
    case .descriptorInvalid: .moduleIdentityMismatch
    case .uiContributionsInvalid: .validationFailed
    case .dlopenFailed, .symbolMissing, .refused, .tableInvalid: .loadFailed
    }
  }

  public var description: String {
    switch self {
    case .dlopenFailed(let p, let e):
      "dlopen of \(p) failed: \(e)"
        + (e.contains("cannot open shared object") && !e.hasPrefix(p)
          ? " (a library it needs is missing)" : "")
    case .symbolMissing(let s, let e): "dlsym(\(s)) failed: \(e)"
    case .refused(let s, let abi):
      "\(s)(\(ABIVersion.describe(abi))) returned NULL: the module refused to load"
    case .abiUnsupported(let m, let h):
      "module ABI \(ABIVersion.describe(m)) is not supported by host ABI \(ABIVersion.describe(h)) (same major, minor at most the host's); rebuild against this host's forsetti.h"
    case .tableTooSmall(let size, let needed):
      "module table struct_size is \(size) bytes, at least \(needed) are needed"
    case .descriptorInvalid(let why): "module descriptor: \(why)"
    case .uiContributionsInvalid(let why): "UI contributions: \(why)"
    case .tableInvalid(let why): "module table: \(why)"
    }
  }
}

/// The packed ABI version `major << 16 | minor` of forsetti.h.
public enum ABIVersion {
  public static func major(_ v: UInt32) -> UInt32 { v >> 16 }
  public static func minor(_ v: UInt32) -> UInt32 { v & 0xFFFF }
  public static func describe(_ v: UInt32) -> String { "\(major(v)).\(minor(v))" }

  /// Same major, minor no newer than the host's (Qt, GStreamer and CLAP use the same rule).
  public static func isSupported(module: UInt32, host: UInt32) -> Bool {
    major(module) == major(host) && minor(module) <= minor(host)
  }
}
