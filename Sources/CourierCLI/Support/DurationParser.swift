/// Parses human durations for flags: `500ms`, `30s`, `5m`, `2h`, `7d`, or plain seconds.
enum DurationParser {
    /// Seconds, or nil when `text` is not a duration.
    static func seconds(_ text: String) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800)]
        for (suffix, scale) in units where trimmed.hasSuffix(suffix) {
            let number = trimmed.dropLast(suffix.count)
            if let value = Double(number), value >= 0, value.isFinite { return value * scale }
        }
        if let value = Double(trimmed), value >= 0, value.isFinite { return value }
        return nil
    }
}

import Foundation
