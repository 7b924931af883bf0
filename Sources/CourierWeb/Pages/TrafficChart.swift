import CourierCore
import Foundation

/// An hour of attempts as server-rendered SVG bars, one per minute: delivered (2xx) at the
/// bottom, failed stacked on top. The page's Content-Security-Policy allows no script and no
/// inline style from elsewhere, so the chart is plain SVG whose bars are sized by attributes
/// and coloured by the stylesheet's classes; each bar carries a `<title>` with its minute.
struct TrafficChart {
    /// The drawing's width and height in SVG units (the page stretches it to its width).
    static let width = 600.0
    static let height = 80.0

    let width = TrafficChart.width
    let height = TrafficChart.height
    let bars: [Bar]
    /// How many bars (one per minute), for tests and the screen reader's label.
    let minutes: Int
    /// What the chart says in words (its `aria-label` and the line under it).
    let summary: String
    /// The busiest minute's attempts, the top of the scale; 0 with none.
    let scale: Int
    let hasAttempts: Bool
    let from: String
    let to: String

    /// One minute.
    struct Bar {
        let x: String
        let barWidth: String
        /// The delivered part: from the bottom up.
        let deliveredY: String
        let deliveredHeight: String
        /// The failed part, on top of the delivered one.
        let failedY: String
        let failedHeight: String
        let title: String
    }

    init(_ traffic: Traffic) {
        let minutes = traffic.minutes
        self.minutes = minutes.count
        let peak = minutes.map(\.attempts).max() ?? 0
        scale = peak
        hasAttempts = peak > 0
        let slot = minutes.isEmpty ? Self.width : Self.width / Double(minutes.count)
        let gap = slot > 4 ? 1.0 : 0
        bars = minutes.enumerated().map { index, minute in
            let delivered = Self.barHeight(minute.delivered, peak: peak)
            let failed = Self.barHeight(minute.failed, peak: peak)
            let time = Self.clock(minute.start)
            let title = index == minutes.count - 1
                ? "\(time) UTC (this minute so far): \(minute.delivered) delivered, \(minute.failed) failed"
                : "\(time) UTC: \(minute.delivered) delivered, \(minute.failed) failed"
            return Bar(
                x: Self.number(Double(index) * slot), barWidth: Self.number(slot - gap),
                deliveredY: Self.number(Self.height - delivered), deliveredHeight: Self.number(delivered),
                failedY: Self.number(Self.height - delivered - failed), failedHeight: Self.number(failed), title: title)
        }
        from = minutes.first.map { Self.clock($0.start) } ?? ""
        to = minutes.last.map { Self.clock($0.start) } ?? ""
        summary = Self.summary(traffic)
    }

    /// The chart in words: how many attempts, how many failed, and the busiest minute, only
    /// when there was one (never a peak of nothing).
    static func summary(_ traffic: Traffic) -> String {
        guard traffic.attempts > 0, let busiest = traffic.minutes.max(by: { $0.attempts < $1.attempts }) else {
            return "No attempt finished in the last hour."
        }
        let rate = traffic.errorRate.map(percent) ?? "0%"
        return "\(traffic.delivered) delivered and \(traffic.failed) failed in the last hour (\(rate) failed); "
            + "busiest minute \(clock(busiest.start)) UTC with \(busiest.attempts)."
    }

    /// `value` as a share of `peak` in chart units; a minute with any attempt gets at least
    /// one unit, so it never looks like an empty one.
    static func barHeight(_ value: Int, peak: Int) -> Double {
        guard value > 0, peak > 0 else { return 0 }
        return max(1, Double(value) / Double(peak) * height)
    }

    /// A share as a percentage: `0%`, `0.4%`, `12%`.
    static func percent(_ share: Double) -> String {
        let value = share * 100
        if value == 0 { return "0%" }
        return value < 10 ? String(format: "%.1f%%", value) : String(format: "%.0f%%", value)
    }

    /// `HH:MM` in UTC.
    static func clock(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let day = ((seconds % 86_400) + 86_400) % 86_400
        return String(format: "%02d:%02d", day / 3600, day % 3600 / 60)
    }

    private static func number(_ value: Double) -> String { String(format: "%.1f", value) }
}
