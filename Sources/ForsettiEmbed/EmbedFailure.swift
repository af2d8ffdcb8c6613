import CForsettiEmbed

/// Why a C API call was refused: the reason code of `forsetti/embed.h` and the offending value.
enum EmbedFailure: Error, CustomStringConvertible {
  /// A required pointer argument, by its parameter name, was NULL.
  case nullArgument(String)
  /// The string argument of that name is not UTF-8.
  case invalidUTF8(String)
  /// The argument of that name holds a value the host has no use for, and why.
  case invalidValue(String, value: String, why: String)
  /// `host_new` without a setting it needs.
  case missingSetting(String)
  /// The call does not fit where the host is in its life.
  case wrongState(String)
  /// The host itself refused, in its own words.
  case host(String)

  /// The header's FORSETTI_EMBED_ERROR_* for this failure.
  var code: Int32 {
    switch self {
    case .nullArgument: FORSETTI_EMBED_ERROR_NULL_ARGUMENT
    case .invalidUTF8: FORSETTI_EMBED_ERROR_INVALID_UTF8
    case .invalidValue: FORSETTI_EMBED_ERROR_INVALID_VALUE
    case .missingSetting: FORSETTI_EMBED_ERROR_MISSING_SETTING
    case .wrongState: FORSETTI_EMBED_ERROR_WRONG_STATE
    case .host: FORSETTI_EMBED_ERROR_HOST
    }
  }

  var description: String {
    switch self {
    case .nullArgument(let name): "\(name) is NULL"
    case .invalidUTF8(let name): "\(name) is not UTF-8"
    case .invalidValue(let name, let value, let why): "\(name) '\(value)': \(why)"
    case .missingSetting(let what): "the configuration has no \(what)"
    case .wrongState(let why): why
    case .host(let why): why
    }
  }
}
