import CForsettiJournal
import ForsettiBridge
import ForsettiCore
import Glibc
import Synchronization

/// Sends records to systemd's journal as structured entries (sd_journal_sendv(3)) when the
/// host's output is the journal stream (`$JOURNAL_STREAM`), so that `journalctl
/// FORSETTI_MODULE=com.example.counter` or `FORSETTI_REASON=…` finds them. A record the journal
/// does not take (its socket refuses it) is written as the plain line ``StreamLogSink`` writes,
/// and that is said once; without libsystemd or the journal's socket, ``selected(fd:minimum:errorsTo:journal:)``
/// gives the plain ``StreamLogSink`` itself.
///
/// Fields of an entry (docs/operator-guide.md, "Journal fields"):
/// - `MESSAGE`: ``LogRecord/formatted``, without the stream's `<N>` prefix;
/// - `PRIORITY`: ``StreamLogSink/syslogPriority(_:)``; `SYSLOG_IDENTIFIER=forsetti-host`;
/// - `FORSETTI_ORIGIN` (`host` or `module`), `FORSETTI_MODULE` (when the record has one) and
///   `FORSETTI_REASON` (``LogRecord/reason``, or metadata `reason` when it is a reason code);
/// - each other metadata key as `FORSETTI_<KEY>` for the host's lines and `FORSETTI_META_<KEY>`
///   for a module's, the key upper-cased with anything outside `[A-Z0-9_]` written `_`.
///
/// Only these names are written: a module's text is a value, never a name, and a module's
/// metadata sits under `FORSETTI_META_`, so no module can set `PRIORITY`, `MESSAGE`, a trusted
/// `_`-field or `FORSETTI_MODULE`. A host line carries `CODE_FILE` (`#fileID`), `CODE_LINE` and
/// `CODE_FUNC` of its log call (``LogRecord/place``); a module's text carries none, as the host
/// does not know where in the module it was written.
package final class JournalLogSink: LogSink {
  private let minimum: LogLevel
  /// Where a record goes when the journal refuses it: the stream the journal reads anyway.
  private let fallback: StreamLogSink
  private let noticeFD: Int32
  private let refused = Atomic<Bool>(false)

  /// `fallback` takes what the journal refuses; `noticeFD` is where that is said, once.
  package init(minimum: LogLevel = .info, fallback: StreamLogSink, noticeFD: Int32 = 2) {
    self.minimum = minimum
    self.fallback = fallback
    self.noticeFD = noticeFD
  }

  /// The sink for lines to `fd` (warnings and errors to `errorsTo`): a `JournalLogSink` when
  /// `journal` (by default `$JOURNAL_STREAM`) is the stream of `fd`, `errorsTo` or standard
  /// error, the journal's socket is there and libsystemd opens; else the plain ``StreamLogSink``.
  package static func selected(
    fd: Int32 = 1, minimum: LogLevel = .info, errorsTo: Int32? = 2,
    journal: StreamLogSink.JournalStream? = .environment
  ) -> any LogSink {
    let stream = StreamLogSink(fd: fd, minimum: minimum, errorsTo: errorsTo, journal: journal)
    guard let journal, [fd, errorsTo ?? fd, 2].contains(where: { journal.isConnected($0) }),
      hasSocket(), forsetti_journal_load() != 0
    else { return stream }
    return JournalLogSink(minimum: minimum, fallback: stream)
  }

  /// Where sd_journal_sendv sends, always (sd_journal_print(3)).
  static let socketPath = "/run/systemd/journal/socket"

  /// Whether the journal's socket is there. sd_journal_sendv drops an entry silently, returning
  /// success, when it is not (ENOENT: "the journal is not available"), so without this check a
  /// stream with no journald behind its socket would lose every line.
  static func hasSocket() -> Bool {
    var st = stat()
    return stat(socketPath, &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK
  }

  package func write(_ record: LogRecord) {
    guard record.level >= minimum else { return }
    let result = Self.send(Self.fields(of: record))
    guard result != 0 else { return }
    if !refused.exchange(true, ordering: .relaxed) {
      let why = String(cString: strerror(0 &- result))
      FileDescriptor.writeAll(
        noticeFD,
        Array("forsetti-host: the journal refused a record (\(why)): writing plain lines instead\n".utf8))
    }
    fallback.write(record)
  }

  /// The fields of `record`'s entry, in order, each `NAME` with its value's bytes.
  package static func fields(of record: LogRecord) -> [(name: String, value: [UInt8])] {
    var out: [(name: String, value: [UInt8])] = [
      ("MESSAGE", Array(record.formatted.utf8)),
      ("PRIORITY", Array(String(StreamLogSink.syslogPriority(record.level)).utf8)),
      ("SYSLOG_IDENTIFIER", Array("forsetti-host".utf8)),
      ("FORSETTI_ORIGIN", Array((record.origin == .host ? "host" : "module").utf8)),
    ]
    if let id = record.moduleID ?? record.subject { out.append(("FORSETTI_MODULE", Array(id.utf8))) }
    if let place = record.place {
      out.append(("CODE_FILE", Array(place.file.utf8)))
      out.append(("CODE_LINE", Array(String(place.line).utf8)))
      out.append(("CODE_FUNC", Array(place.function.utf8)))
    }
    // Metadata keys are the host's (a module's log call carries a message alone), so a reason
    // code there is the host's; a value that is no reason code stays a plain field.
    let metadataReason = record.metadata["reason"].flatMap { ReasonCode(rawValue: $0) }
    if let reason = record.reason ?? metadataReason {
      out.append(("FORSETTI_REASON", Array(reason.rawValue.utf8)))
    }
    for (key, value) in record.metadata.sorted(by: { $0.key < $1.key }) {
      if key == "reason", metadataReason != nil { continue }
      out.append((fieldName(key, origin: record.origin), Array(value.utf8)))
    }
    return out
  }

  /// Names the host writes itself, which no metadata key may take.
  static let reserved: Set<String> = ["FORSETTI_ORIGIN", "FORSETTI_MODULE", "FORSETTI_REASON"]

  /// The journal field of metadata `key`: `FORSETTI_` (`FORSETTI_META_` for a module's, or for a
  /// host key that would take a reserved name) and the key upper-cased, anything outside
  /// `[A-Z0-9_]` as `_`, cut to the journal's 64 characters. The prefix keeps the name from
  /// starting with `_` (trusted fields) or a digit.
  package static func fieldName(_ key: String, origin: LogRecord.Origin) -> String {
    let body = String(
      key.unicodeScalars.map { u -> Character in
        switch u {
        case "a"..."z": Character(String(u).uppercased())
        case "A"..."Z", "0"..."9", "_": Character(u)
        default: "_"
        }
      })
    let plain = "FORSETTI_" + body
    let name = origin == .module || reserved.contains(plain) ? "FORSETTI_META_" + body : plain
    return String(name.prefix(64))
  }

  /// Whether `name` is a field name the journal keeps: 1–64 of `[A-Z0-9_]`, not starting with
  /// `_` or a digit (journald drops others).
  package static func isValidFieldName(_ name: String) -> Bool {
    guard let first = name.unicodeScalars.first, name.unicodeScalars.count <= 64 else { return false }
    return ("A"..."Z").contains(first)
      && name.unicodeScalars.allSatisfy { ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
  }

  /// sd_journal_sendv over `fields`, as `NAME=value` iovecs into one buffer: 0 or a negative errno.
  static func send(_ fields: [(name: String, value: [UInt8])]) -> Int32 {
    var buffer: [UInt8] = []
    var spans: [(start: Int, count: Int)] = []
    for f in fields where isValidFieldName(f.name) {
      let start = buffer.count
      buffer.append(contentsOf: f.name.utf8)
      buffer.append(UInt8(ascii: "="))
      buffer.append(contentsOf: f.value)
      spans.append((start, buffer.count - start))
    }
    return buffer.withUnsafeMutableBytes { bytes -> Int32 in
      guard let base = bytes.baseAddress else { return -EINVAL }
      let iov = spans.map { iovec(iov_base: base + $0.start, iov_len: $0.count) }
      return iov.withUnsafeBufferPointer { forsetti_journal_sendv($0.baseAddress, Int32(clamping: $0.count)) }
    }
  }
}
