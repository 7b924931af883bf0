import CourierCore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Printing helpers shared by the commands: JSON, times, durations, terminals.
package enum Output {
    /// Prints a JSON value (dictionaries, arrays, strings, numbers, NSNull) on one line, keys sorted.
    /// Numbers JSON cannot hold (NaN, infinities) are printed as strings.
    package static func json(_ value: Any) throws {
        let data = try JSONSerialization.data(
            withJSONObject: jsonSafe(value), options: [.sortedKeys, .withoutEscapingSlashes])
        print(String(decoding: data, as: UTF8.self))
    }

    /// `value` with every non-finite number replaced by its text: a stored `duration_ms` of
    /// `Infinity` must not stop a listing.
    package static func jsonSafe(_ value: Any) -> Any {
        switch value {
        case let dictionary as [String: Any]: return dictionary.mapValues(jsonSafe)
        case let array as [Any]: return array.map(jsonSafe)
        case let number as Double where !number.isFinite: return "\(number)"
        case let number as Float where !number.isFinite: return "\(number)"
        default: return value
        }
    }

    /// ISO 8601 in UTC with milliseconds, e.g. `2026-11-22T23:40:01.123Z`.
    package static func timestamp(_ date: Date?) -> String {
        guard let date else { return "-" }
        return timestampFormatter.string(from: date)
    }

    /// A stored time as ISO 8601, or as the server wrote it when it is no printable date
    /// (`infinity`, year 200000); `-` for none.
    package static func timestamp(_ time: StoredTime?) -> String {
        guard let time else { return "-" }
        guard let date = time.date else { return Redaction.text(time.text) }
        return timestamp(date)
    }

    nonisolated(unsafe) private static let timestampFormatter: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()

    /// A JSON timestamp or null.
    package static func jsonTime(_ date: Date?) -> Any { date.map { timestamp($0) } ?? NSNull() }

    /// A JSON stored time (ISO 8601, or the server's text such as `infinity`) or null.
    package static func jsonTime(_ time: StoredTime?) -> Any { time.map { timestamp($0) } ?? NSNull() }

    /// A JSON value or null.
    package static func orNull(_ value: (any Sendable)?) -> Any { value ?? NSNull() }

    /// Seconds as a short human duration: `850ms`, `12s`, `5m`, `2h30m`, `3d4h`.
    package static func duration(_ seconds: Double) -> String {
        // Stored schedules can hold anything an interval can; beyond a million years (or not
        // finite, or negative) the number itself is the clearest display, and cannot trap.
        guard seconds.isFinite else { return seconds.isNaN ? "NaN" : seconds > 0 ? "infinite" : "-infinite" }
        guard seconds >= 0, seconds < 3.2e13 else { return String(format: "%.0fs", seconds) }
        if seconds < 1 { return "\(Int((seconds * 1000).rounded()))ms" }
        if seconds < 60 { return seconds == seconds.rounded() ? "\(Int(seconds))s" : String(format: "%.1fs", seconds) }
        let whole = Int(seconds.rounded())
        if whole < 3600 { return whole % 60 == 0 ? "\(whole / 60)m" : "\(whole / 60)m\(whole % 60)s" }
        if whole < 86_400 { return whole % 3600 / 60 == 0 ? "\(whole / 3600)h" : "\(whole / 3600)h\(whole % 3600 / 60)m" }
        return whole % 86_400 / 3600 == 0 ? "\(whole / 86_400)d" : "\(whole / 86_400)d\(whole % 86_400 / 3600)h"
    }

    /// A duration as people write it: `500ms`, `30s`, `5m`, `2h`, `7d`.
    package static func duration(_ duration: Duration) -> String {
        self.duration(duration.inSeconds)
    }

    /// A schedule as `5s,5m,30m`, or `default`.
    package static func schedule(_ delays: [Duration]?) -> String {
        delays.map { $0.map { duration($0) }.joined(separator: ",") } ?? "default"
    }

    /// Durations as JSON numbers of seconds (`null` for nil), as the `--json` fields
    /// `*_seconds` carry them.
    package static func seconds(_ duration: Duration?) -> Any {
        orNull(duration?.inSeconds)
    }

    /// A list of durations as JSON seconds (`null` for nil).
    package static func seconds(_ durations: [Duration]?) -> Any {
        orNull(durations?.map(\.inSeconds))
    }

    /// Cuts `text` to `limit` characters with an ellipsis.
    package static func clip(_ text: String, _ limit: Int) -> String {
        text.count <= limit ? text : String(text.prefix(limit - 1)) + "…"
    }

    /// A single-line version of `text` (newlines and tabs as spaces, other control characters
    /// and terminal escapes removed).
    package static func oneLine(_ text: String) -> String {
        Redaction.oneLine(text)
    }

    /// `bytes` as printable text on one line, for bodies and response excerpts that may be
    /// binary: valid UTF-8 stays as it is, except control characters, DEL, C1 controls and
    /// bidirectional overrides, which become `\n`, `\r`, `\t`, `\e`, `\xNN` or `\u{NNNN}`;
    /// bytes that are not UTF-8 become `\xNN`, and a backslash is doubled so the escapes are
    /// unambiguous. Nothing a receiver sends can then move the cursor or recolour the
    /// operator's terminal, and the operator still sees what was there.
    package static func escaped(_ bytes: some Collection<UInt8>) -> String {
        let b = Array(bytes)
        var out = ""
        out.reserveCapacity(b.count)
        var i = 0
        while i < b.count {
            let lead = b[i]
            let length: Int
            switch lead {
            case 0x00...0x7F: length = 1
            case 0xC2...0xDF: length = 2
            case 0xE0...0xEF: length = 3
            case 0xF0...0xF4: length = 4
            default: length = 0
            }
            if length > 0, i + length <= b.count, let text = String(validating: b[i..<(i + length)], as: UTF8.self),
                let scalar = text.unicodeScalars.first
            {
                appendEscaped(scalar, to: &out)
                i += length
            } else {
                out += "\\x" + hex(lead, width: 2)
                i += 1
            }
        }
        return out
    }

    /// `text` escaped like `escaped(_:)` bytes.
    package static func escaped(_ text: String) -> String { escaped(Array(text.utf8)) }

    private static func appendEscaped(_ scalar: Unicode.Scalar, to out: inout String) {
        switch scalar.value {
        case 0x5C: out += "\\\\"
        case 0x0A: out += "\\n"
        case 0x0D: out += "\\r"
        case 0x09: out += "\\t"
        case 0x1B: out += "\\e"
        case 0x00...0x1F, 0x7F: out += "\\x" + hex(UInt8(scalar.value), width: 2)
        case 0x80...0x9F, 0x202A...0x202E, 0x2066...0x2069: out += "\\u{" + hex(scalar.value, width: 4) + "}"
        default: out.unicodeScalars.append(scalar)
        }
    }

    private static func hex(_ value: some BinaryInteger, width: Int) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// Whether standard error is a terminal (progress is shown only there).
    package static var stderrIsTerminal: Bool { isatty(2) == 1 }

    /// Whether standard input is a terminal (confirmation prompts only there).
    package static var stdinIsTerminal: Bool { isatty(0) == 1 }

    /// Whether standard output is a terminal.
    package static var stdoutIsTerminal: Bool { isatty(1) == 1 }

    /// Writes to standard error without a newline.
    package static func stderr(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// A number with thousands separators: 50,000.
    package static func count(_ value: Int) -> String {
        value.formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US_POSIX")))
    }

    /// `value` and a noun phrase whose first `jobs` (or `deliveries`, `requests`, ...) is made
    /// singular when `value` is 1: `counted(1, "dead jobs (queue x)")` is `1 dead job (queue x)`.
    package static func counted(_ value: Int, _ phrase: String) -> String {
        "\(count(value)) \(value == 1 ? singular(phrase) : phrase)"
    }

    /// `phrase` with its first plural noun made singular (`jobs` -> `job`, `deliveries` ->
    /// `delivery`, `matches` -> `match`, `queues` -> `queue`).
    package static func singular(_ phrase: String) -> String {
        let forms = [("deliveries", "delivery"), ("matches", "match"), ("jobs", "job"), ("queues", "queue"),
                     ("requests", "request"), ("attempts", "attempt"), ("endpoints", "endpoint"),
                     ("messages", "message"), ("hosts", "host"), ("destinations", "destination")]
        var words = phrase.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        for index in words.indices {
            if let form = forms.first(where: { words[index] == $0.0 }) {
                words[index] = form.1
                return words.joined(separator: " ")
            }
        }
        return phrase
    }
}

/// A one-line progress display on a terminal's stderr, redrawn at most five times a second;
/// silent when stderr is not a terminal.
package final class ProgressLine {
    private let label: String
    private let total: Int?
    private let enabled: Bool
    private let started = Date()
    private var lastDraw = Date.distantPast

    package init(_ label: String, total: Int?) {
        self.label = label
        self.total = total
        enabled = Output.stderrIsTerminal
    }

    package func update(_ done: Int) {
        guard enabled, Date().timeIntervalSince(lastDraw) >= 0.2 else { return }
        lastDraw = Date()
        draw(done)
    }

    package func finish(_ done: Int) {
        guard enabled else { return }
        draw(done)
        Output.stderr("\n")
    }

    private func draw(_ done: Int) {
        let rate = Double(done) / max(Date().timeIntervalSince(started), 0.001)
        var line = "\r\(label) \(Output.count(done))"
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            let width = 30
            let filled = Int(fraction * Double(width))
            line += "/\(Output.count(total)) [" + String(repeating: "#", count: filled)
                + String(repeating: "-", count: width - filled) + "] \(Int(fraction * 100))%"
        }
        line += "  \(Output.count(Int(rate)))/s   "
        Output.stderr(line)
    }
}
