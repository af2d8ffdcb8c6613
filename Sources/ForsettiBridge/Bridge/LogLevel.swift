import Glibc

/// Log levels, numbered as in forsetti/host.h.
public enum LogLevel: Int32, Sendable, Comparable, CaseIterable {
  case debug = 0
  case info = 1
  case warning = 2
  case error = 3

  public var name: String {
    switch self {
    case .debug: "debug"
    case .info: "info"
    case .warning: "warning"
    case .error: "error"
    }
  }

  public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}
