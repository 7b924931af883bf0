/// Conversions of `Duration` for Courier's own modules: every API takes and returns `Duration`;
/// these give the number a statement binds, a C call takes or arithmetic needs, at that spot.
extension Duration {
    /// The duration in seconds, as a `Double`.
    package var inSeconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }

    /// Whole milliseconds, rounded to the nearest and saturating at `Int`'s bounds.
    package var inMilliseconds: Int {
        let milliseconds = (inSeconds * 1000).rounded()
        if milliseconds >= Double(Int.max) { return .max }
        if milliseconds <= Double(Int.min) { return .min }
        return Int(milliseconds)
    }

    /// Whole nanoseconds, saturating at `Int64`'s bounds (about 292 years).
    package var inNanoseconds: Int64 {
        let parts = components
        let (scaled, overflow) = parts.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return parts.seconds < 0 ? .min : .max }
        let (sum, overflow2) = scaled.addingReportingOverflow(parts.attoseconds / 1_000_000_000)
        if overflow2 { return parts.seconds < 0 ? .min : .max }
        return sum
    }

}
