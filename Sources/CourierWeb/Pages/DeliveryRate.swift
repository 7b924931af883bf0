import Foundation

/// Deliveries per minute over the last hour, from samples of the highest attempt id.
///
/// Every delivery writes one `courier.attempts` row and its id only grows, so the difference
/// of two samples of `max(id)` (one index probe each) is the number of deliveries between them,
/// however many millions of rows the table holds; counting the last hour's rows instead costs
/// as much as the traffic. Ids skipped by rolled-back inserts count as deliveries, so the
/// figure is an upper bound, and it covers only the time since the console started.
struct DeliveryRate: Sendable {
    /// A sample: when, and the highest attempt id then.
    private(set) var samples: [(time: Date, highWater: Int64)] = []

    /// Keeps a sample (and forgets those older than an hour and a minute).
    mutating func record(_ time: Date, highWater: Int64) {
        if let last = samples.last, time <= last.time { return }
        samples.append((time, highWater))
        let horizon = time.addingTimeInterval(-3660)
        samples.removeAll { $0.time < horizon }
    }

    /// Deliveries in each of the last `minutes` whole minutes before `now`, oldest first; nil
    /// for a minute no pair of samples covers. A delta between two samples is spread over the
    /// minutes between them in proportion to time.
    func perMinute(now: Date, minutes: Int = 60) -> [Double?] {
        let end = (now.timeIntervalSince1970 / 60).rounded(.down) * 60
        let start = end - Double(minutes) * 60
        var buckets = [Double?](repeating: nil, count: minutes)
        for (a, b) in zip(samples, samples.dropFirst()) {
            let t0 = a.time.timeIntervalSince1970
            let t1 = b.time.timeIntervalSince1970
            let delta = Double(max(0, b.highWater - a.highWater))
            guard t1 > t0, t1 > start, t0 < end else { continue }
            for index in 0..<minutes {
                let m0 = start + Double(index) * 60
                let overlap = min(t1, m0 + 60) - max(t0, m0)
                guard overlap > 0 else { continue }
                buckets[index] = (buckets[index] ?? 0) + delta * overlap / (t1 - t0)
            }
        }
        return buckets
    }

    /// The values as an SVG polyline in a `width` by `height` box (y grows downwards), the
    /// largest value at the top; minutes without data are left out. Nil without two points.
    static func polyline(_ values: [Double?], width: Double, height: Double) -> (points: String, peak: Double)? {
        let known = values.compactMap { $0 }
        guard known.count >= 2 else { return nil }
        let peak = max(known.max() ?? 0, 1)
        let step = values.count > 1 ? width / Double(values.count - 1) : width
        let points = values.enumerated().compactMap { index, value -> String? in
            guard let value else { return nil }
            return String(format: "%.1f,%.1f", Double(index) * step, height - value / peak * height)
        }
        return (points.joined(separator: " "), peak)
    }
}
