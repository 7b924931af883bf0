import Foundation

/// How long to wait before the next try: the one place Courier computes backoff.
///
/// Every wait in Courier comes from a `Backoff`: the retry client's in-process retries
/// (RetryClient's `RetryPolicy`), the queue's durable schedule (``RetrySchedule``), the claim
/// loop's retry of a failed statement and the listener's reconnect (`ClaimLoopMachine`).
/// Delays go in and come out as `Duration`; seconds as `Double` are this type's private
/// arithmetic.
///
/// - ``exponential(initial:base:maximum:jitter:)``: `initial × base^(n-1)` after failure `n`,
///   capped at `maximum` before and after jitter, so no delay ever exceeds the cap.
/// - ``steps(_:jitter:)``: the `n`-th entry of a list; the last entry repeats.
public struct Backoff: Sendable, Equatable {
    /// How a computed delay is randomized, so that many clients failing together do not retry
    /// together.
    public enum Jitter: Sendable, Equatable {
        /// The exact delay.
        case none
        /// Uniform in `[0, delay]` ("full jitter").
        case full
        /// Uniform in `[delay × (1 − f), delay × (1 + f)]`; `f` is clamped to `[0, 1]`.
        case proportional(Double)
    }

    private enum Growth: Sendable, Equatable {
        case exponential(initial: Double, base: Double, maximum: Double)
        case steps([Double])
    }

    private let growth: Growth
    /// The randomization applied to each delay.
    public let jitter: Jitter

    /// Exponential growth: `initial`, `initial × base`, `initial × base²`, … capped at `maximum`.
    public static func exponential(
        initial: Duration, base: Double = 2, maximum: Duration, jitter: Jitter = .none
    ) -> Backoff {
        Backoff(
            growth: .exponential(initial: initial.inSeconds, base: base, maximum: max(0, maximum.inSeconds)),
            jitter: jitter)
    }

    /// A fixed list of delays, the last one repeating; an empty list waits nothing.
    public static func steps(_ delays: [Duration], jitter: Jitter = .none) -> Backoff {
        Backoff(growth: .steps(delays.map(\.inSeconds)), jitter: jitter)
    }

    private init(growth: Growth, jitter: Jitter) {
        self.growth = growth
        self.jitter = jitter
    }

    /// The delay after failure `n` (1-based), before jitter.
    public func baseDelay(afterFailure n: Int) -> Duration {
        Self.duration(baseSeconds(afterFailure: n))
    }

    private func baseSeconds(afterFailure n: Int) -> Double {
        switch growth {
        case .exponential(let initial, let base, let maximum):
            let exponent = Double(max(0, n - 1))
            let value = min(maximum, initial * pow(base, exponent))
            return value.isFinite ? max(0, value) : maximum
        case .steps(let delays):
            guard let last = delays.last else { return 0 }
            let index = max(0, n - 1)
            return index < delays.count ? delays[index] : last
        }
    }

    /// The delay after failure `n` with the jitter taken at `random`, a value in [0, 1] (0 the
    /// shortest, 0.5 the nominal delay for proportional jitter, 1 the longest): pure, for
    /// schedules whose randomness is drawn elsewhere.
    public func delay(afterFailure n: Int, random: Double) -> Duration {
        let r = min(max(random, 0), 1)
        let base = baseSeconds(afterFailure: n)
        let jittered: Double
        switch jitter {
        case .none: jittered = base
        case .full: jittered = base * r
        case .proportional(let fraction):
            let f = min(1, max(0, fraction))
            jittered = base * (1 - f + 2 * f * r)
        }
        return Self.duration(capped(jittered))
    }

    /// The delay after failure `n`, jitter drawn from `rng`.
    public func delay<G: RandomNumberGenerator>(afterFailure n: Int, using rng: inout G) -> Duration {
        let base = baseSeconds(afterFailure: n)
        let jittered: Double
        switch jitter {
        case .none:
            jittered = base
        case .full:
            jittered = Double.random(in: 0...1, using: &rng) * base
        case .proportional(let fraction):
            let f = min(1, max(0, fraction))
            jittered = base * Double.random(in: (1 - f)...(1 + f), using: &rng)
        }
        return Self.duration(capped(jittered))
    }

    /// The delay after failure `n`, jitter drawn from the system generator.
    public func delay(afterFailure n: Int) -> Duration {
        var rng = SystemRandomNumberGenerator()
        return delay(afterFailure: n, using: &rng)
    }

    /// Whole nanoseconds, so `0.1 s × 2` is exactly `.milliseconds(200)`; delays beyond what
    /// nanoseconds in an `Int64` hold (about 292 years) keep their seconds.
    private static func duration(_ seconds: Double) -> Duration {
        let nanoseconds = (seconds * 1e9).rounded()
        return nanoseconds < 9.2e18 ? .nanoseconds(Int64(nanoseconds)) : .seconds(seconds)
    }

    /// Never negative, never above an exponential cap, always finite.
    private func capped(_ seconds: Double) -> Double {
        switch growth {
        case .exponential(_, _, let maximum):
            return seconds.isFinite ? min(maximum, max(0, seconds)) : maximum
        case .steps:
            return seconds.isFinite ? max(0, seconds) : 0
        }
    }
}
