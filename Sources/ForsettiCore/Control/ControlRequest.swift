// The control protocol of a running host (docs/control.md), version 2:
//
//   STATE/control.sock, a unix stream socket, mode 0600; the host answers only a peer of its
//   own uid (or root), checked with SO_PEERCRED. One request per connection, one line each way:
//
//   client → host   {"protocol":2,"request":{"verb":"explain","module":"com.x"}}\n
//   host → client   {"protocol":2,"host":{"pid":123,"state":"/var/lib/forsetti"},"ok":true,
//                    "answer":{…},"changes":[{"moduleID":"com.x","state":"started"}]}\n
//              or   {"protocol":2,"host":{…},"ok":false,"error":{"code":"notFound","message":"…",
//                    "field":"module","value":"com.x"}}\n
//
//   A request is typed (`ControlCommand`): each verb has its own fields, and a line with a
//   field the verb does not take, or a field of the wrong type, is refused naming the field.
//   The host answers from its own state (its judge, in-memory overrides included, its modules'
//   run states and reported health); a client never sends the host's options. Lines are at
//   most `maxLine` bytes; the whole request line must arrive within `requestTimeout` seconds of
//   connecting, and the client must take the whole answer within `sendTimeout` seconds.

/// A request to a running host: one typed command.
public struct ControlRequest: Sendable, Equatable {
  public var command: ControlCommand

  /// The protocol spoken here; a request or answer of another version is refused.
  public static let protocolVersion = 2
  /// The verbs a host serves through its socket.
  public static let verbs: Set<String> = Set(ControlCommand.verbNames)
  /// The longest line either side sends or accepts.
  public static let maxLine = 1 << 20
  /// The most capabilities one request names.
  public static let maxList = 64
  /// The longest string field of a request, in bytes.
  public static let maxString = 4096
  /// Seconds a client has to send its whole request line, from connecting.
  public static let requestTimeout = 5.0
  /// Seconds the host has to serve a request once read.
  public static let answerTimeout = 60.0
  /// Seconds a client has to take the whole answer.
  public static let sendTimeout = 5.0
  /// Seconds a client keeps trying again while the host says it is busy.
  public static let busyRetry = 10.0

  /// A request of `command`.
  public init(_ command: ControlCommand) { self.command = command }

  /// The verb's name, as the command line spells it.
  public var verb: String { command.verb }

  /// The request as one line.
  public var line: [UInt8] {
    let doc = JSONValue.object(
      JSONObject([("protocol", .number(String(Self.protocolVersion))), ("request", command.json)]))
    return Array((JSONWriter.string(doc) + "\n").utf8)
  }

  /// Reads a request line from a client (untrusted): the reason it cannot be taken, or the
  /// request.
  public static func decode(_ bytes: [UInt8]) -> Result<ControlRequest, ControlError> {
    guard bytes.count <= maxLine else {
      return .failure(.malformed("a request longer than \(maxLine) bytes"))
    }
    guard let value = try? JSONParser.parse(bytes), let o = value.objectValue else {
      return .failure(.malformed("a request that is not a JSON object"))
    }
    guard let version = o["protocol"]?.integerValue else {
      return .failure(.malformed("no \"protocol\" number"))
    }
    guard version == protocolVersion else { return .failure(.version(version)) }
    if let extra = o.members.map(\.key).first(where: { $0 != "protocol" && $0 != "request" }) {
      return .failure(.field(extra, "is not a field of a request (it has \"protocol\" and \"request\")"))
    }
    guard let body = o["request"] else { return .failure(.field("request", "is missing")) }
    return ControlCommand.decode(body).map(ControlRequest.init)
  }
}
