import CourierCore
import Foundation

/// How the pages write times, ages and durations, and how they read time filters. Pure
/// functions, so tests pin them without a server.
enum PageFormat {
    /// An age in seconds, short: `0s`, `42s`, `5m 3s`, `2h 10m`, `3d 4h`; `∞` for a
    /// hand-written `-infinity` run time.
    static func age(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "∞" }
        let total = Int(max(0, seconds).rounded(.down))
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m \(total % 60)s" }
        if total < 86_400 { return "\(total / 3600)h \(total % 3600 / 60)m" }
        return "\(total / 86_400)d \(total % 86_400 / 3600)h"
    }

    /// A duration in milliseconds: `12 ms`, `1.5 s`.
    static func milliseconds(_ value: Double) -> String {
        value < 1000 ? String(format: "%.0f ms", value) : String(format: "%.1f s", value / 1000)
    }

    // ISO8601DateFormatter is safe to use from several threads once configured.
    nonisolated(unsafe) private static let iso: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter
    }()

    /// A stored time for people, in UTC (`2026-11-23 18:04:05 UTC`), or the server's own text
    /// for values outside years 1 to 9999.
    static func time(_ value: StoredTime) -> String {
        guard let date = value.date else { return Redaction.text(value.text) }
        return time(date)
    }

    /// A date for people, in UTC.
    static func time(_ date: Date) -> String {
        iso.string(from: date).replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " UTC")
    }

    /// A stored time for `<time datetime>`; nil when it is not a date.
    static func isoTime(_ value: StoredTime) -> String? {
        value.date.map { iso.string(from: $0) }
    }

    /// A date for `<time datetime>`.
    static func isoTime(_ date: Date) -> String {
        iso.string(from: date)
    }

    /// Reads a time filter: a duration back from `now` (`30s`, `15m`, `2h`, `7d`) or a date
    /// (`2026-11-23`, `2026-11-23T10:00`, `2026-11-23 10:00:05`, with `Z` or an offset; without
    /// one it is UTC). Nil for anything else.
    static func parseTime(_ text: String, now: Date = Date()) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let unit = trimmed.last, let factor = ["s": 1.0, "m": 60, "h": 3600, "d": 86_400][String(unit)],
            let amount = Double(trimmed.dropLast()), amount >= 0, amount.isFinite, amount <= 36_500
        {
            return now.addingTimeInterval(-amount * factor)
        }
        var candidate = trimmed.replacingOccurrences(of: " ", with: "T")
        if candidate.count == 10 { candidate += "T00:00:00" }
        if candidate.count == 16 { candidate += ":00" }
        let hasZone = candidate.hasSuffix("Z") || candidate.dropFirst(19).contains("+") || candidate.dropFirst(19).contains("-")
        if !hasZone { candidate += "Z" }
        guard let date = iso.date(from: candidate), StoredTime.range.contains(date.timeIntervalSince1970) else {
            return nil
        }
        return date
    }
}
