import Foundation

/// Parses human durations for flags and environment variables: `500ms`, `30s`, `5m`, `2h`,
/// `7d`, `1w`.
///
/// A unit is required. A bare `1` used to mean one second, so `purge --older-than 1` deleted
/// everything finished more than a second ago when the operator meant a day; now it is refused
/// with a message that names the units. Only `0` may go without one, being zero in any unit.
/// JSON Lines fields keep taking a JSON number as seconds: there the type says what it is.
package enum DurationParser {
    /// The units, longest suffix first so `ms` is not read as `m`.
    package static let units: [(suffix: String, seconds: Double)] = [
        ("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800),
    ]

    /// What a text is as a duration.
    package enum Parsed: Equatable {
        /// A duration of this many seconds.
        case seconds(Double)
        /// A number without a unit (`1`, `2.5`).
        case missingUnit
        /// Anything else (`soon`, `-5s`, `5 parsecs`).
        case invalid
    }

    /// Seconds, or nil when `text` is not a duration (`parse(_:)` says why).
    package static func seconds(_ text: String) -> Double? {
        if case .seconds(let seconds) = parse(text) { return seconds }
        return nil
    }

    /// Reads `text` as a duration.
    package static func parse(_ text: String) -> Parsed {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        for (suffix, scale) in units where trimmed.hasSuffix(suffix) {
            let number = trimmed.dropLast(suffix.count)
            guard isPlainNumber(number), let value = Double(number), (value * scale).isFinite else { return .invalid }
            return .seconds(value * scale)
        }
        guard isPlainNumber(trimmed[...]), let value = Double(trimmed), value.isFinite else { return .invalid }
        return value == 0 ? .seconds(0) : .missingUnit
    }

    /// Digits with at most one decimal point: `Double("inf")`, `Double("1e3")` and
    /// `Double("0x10")` parse too, and none of them is how anyone writes a duration.
    private static func isPlainNumber(_ text: Substring) -> Bool {
        var digits = 0
        var points = 0
        for c in text {
            if c.isASCII && c.isNumber { digits += 1 } else if c == "." { points += 1 } else { return false }
        }
        return digits > 0 && points <= 1
    }

    /// The one-line complaint about `text` given to `flag`, naming the units.
    package static func message(_ text: String, flag: String) -> String {
        let shown = text.trimmingCharacters(in: .whitespaces)
        if parse(text) == .missingUnit {
            return
                "\(flag): \(shown.debugDescription) needs a unit: write \(shown)s, \(shown)m, \(shown)h or \(shown)d "
                + "(units: ms, s, m, h, d, w; e.g. 1s, 5m, 2h, 7d)"
        }
        return "\(flag): \(shown.debugDescription) is not a duration (write e.g. 1s, 5m, 2h, 7d)"
    }
}

/// Parses a duration flag or throws a usage error naming the flag.
package func parseDuration(_ text: String, flag: String) throws -> Duration {
    guard let seconds = DurationParser.seconds(text) else {
        throw CLIError.usage(DurationParser.message(text, flag: flag))
    }
    return .seconds(seconds)
}
