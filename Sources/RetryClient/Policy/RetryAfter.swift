import Foundation

extension RetryPolicy {
    /// Parses a `Retry-After` value into a delay from `now`.
    ///
    /// Both forms of RFC 9110 §10.2.3 are accepted: delta-seconds (`"120"`) and an IMF-fixdate
    /// (`"Wed, 21 Oct 2015 07:28:00 GMT"`). The date is parsed by hand, not with a
    /// `DateFormatter`, so no locale or time zone can change the result. A date in the past gives
    /// zero.
    ///
    /// - Returns: The delay, or `nil` if the value is neither form (including negative numbers).
    public static func parseRetryAfter(_ value: String, now: Date) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            // Very long numbers saturate rather than fail: they are capped later anyway.
            guard let seconds = Int64(trimmed) else { return .seconds(Int64.max / 4) }
            return .seconds(seconds)
        }
        guard let date = parseIMFFixdate(trimmed) else { return nil }
        let delta = date.timeIntervalSince(now)
        return delta <= 0 ? .zero : .seconds(delta)
    }

    /// Parses `"Sun, 06 Nov 1994 08:49:37 GMT"` exactly (RFC 9110 §5.6.7 IMF-fixdate).
    static func parseIMFFixdate(_ text: String) -> Date? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT" else { return nil }
        let weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        guard weekdays.contains(String(parts[0].dropLast())) else { return nil }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard parts[1].count == 2, let day = Int(parts[1]), (1...31).contains(day),
            let monthIndex = months.firstIndex(of: String(parts[2])),
            parts[3].count == 4, let year = Int(parts[3])
        else { return nil }
        let clock = parts[4].split(separator: ":")
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
            let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        let days = daysFromCivil(year: year, month: monthIndex + 1, day: day)
        let unix = days * 86_400 + hour * 3_600 + minute * 60 + second
        return Date(timeIntervalSince1970: TimeInterval(unix))
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let monthIndex = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * monthIndex + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
