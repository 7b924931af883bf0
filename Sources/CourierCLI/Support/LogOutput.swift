import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// How log lines are written to stderr.
enum LogFormat: String, CaseIterable, Sendable {
    /// `<N>` priority prefix (sd-daemon(3)) and no timestamp: journald adds both, and `journalctl
    /// -p err` then shows errors only.
    case journal
    /// A timestamp, the level and the message with `key=value` metadata: for a terminal or a file.
    case text
    /// One JSON object per line: for a log shipper.
    case json

    /// The format `auto` means: `journal` when stderr is the journal stream systemd connected
    /// (`JOURNAL_STREAM` names its device and inode), else `text`.
    ///
    /// - Parameters:
    ///   - journalStream: the `JOURNAL_STREAM` environment variable (`<device>:<inode>`).
    ///   - stderrIdentity: stderr's device and inode, nil when unknown.
    static func detect(journalStream: String?, stderrIdentity: (device: UInt64, inode: UInt64)?) -> LogFormat {
        guard let journalStream, let stderrIdentity else { return .text }
        let parts = journalStream.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return .text }
        return device == stderrIdentity.device && inode == stderrIdentity.inode ? .journal : .text
    }

    /// stderr's device and inode.
    static func stderrIdentity() -> (device: UInt64, inode: UInt64)? {
        var info = stat()
        guard fstat(2, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    /// The syslog priority of a level (sd-daemon(3) prefixes).
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    /// One log line (without the newline). Metadata is sorted by key; values are single-line.
    static func render(
        _ format: LogFormat, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata,
        date: Date
    ) -> String {
        let pairs = metadata.sorted { $0.key < $1.key }
        switch format {
        case .journal:
            let fields = pairs.map { " \($0.key)=\(quoted("\($0.value)"))" }.joined()
            return "<\(priority(level))>\(oneLine(message))\(fields)"
        case .text:
            let fields = pairs.map { " \($0.key)=\(quoted("\($0.value)"))" }.joined()
            return "\(timestamp(date)) \(level.rawValue) \(label): \(oneLine(message))\(fields)"
        case .json:
            var object: [String: String] = [
                "time": timestamp(date), "level": level.rawValue, "logger": label, "message": message,
            ]
            for (key, value) in pairs where object[key] == nil { object[key] = "\(value)" }
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
    }

    private static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: true)
            .timeSeparator(.colon).timeZone(separator: .omitted))
    }

    private static func oneLine(_ text: String) -> String {
        text.contains(where: \.isNewline) ? text.split(whereSeparator: \.isNewline).joined(separator: " ") : text
    }

    private static func quoted(_ value: String) -> String {
        let flat = oneLine(value)
        return flat.contains(" ") || flat.contains("\"") || flat.isEmpty
            ? "\"" + flat.replacingOccurrences(of: "\"", with: "\\\"") + "\"" : flat
    }
}

/// A swift-log handler that writes `LogFormat` lines to stderr, one `write(2)` per line so lines
/// of concurrent threads never interleave.
struct StderrLogHandler: LogHandler {
    let label: String
    let format: LogFormat
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = self.metadata
        if let metadata = event.metadata { all.merge(metadata) { _, new in new } }
        let text = LogFormat.render(
            format, level: event.level, label: label, message: event.message.description, metadata: all, date: Date())
            + "\n"
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { break }
                offset += written
            }
        }
    }
}
