import RetryClient

/// The delays between attempts of a job: the delay after attempt 1, 2, ...; the last entry
/// repeats when attempts outnumber it. Each delay is multiplied by a uniform jitter factor.
public struct RetrySchedule: Sendable, Equatable {
    /// Delays in seconds, after attempt 1, 2, ...
    public var delays: [Double]
    /// Jitter: each delay is multiplied by a factor drawn uniformly from `1 ± jitter`
    /// (default 0.2, i.e. [0.8, 1.2]).
    public var jitter: Double

    /// Creates a schedule; an empty list means "retry at once".
    public init(delays: [Double], jitter: Double = 0.2) {
        self.delays = delays
        self.jitter = max(0, min(1, jitter))
    }

    /// The Standard Webhooks example schedule: attempt 1 at once, then 5 s, 5 min, 30 min, 2 h,
    /// 5 h, 10 h, 14 h, 20 h, 24 h — 10 attempts over about three days.
    public static let standardWebhooks = RetrySchedule(delays: [
        5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 14 * 3600, 20 * 3600, 24 * 3600,
    ])

    /// The attempts a job gets when neither the job nor its queue says otherwise.
    public static let defaultMaxAttempts = 10

    /// The delay before the attempt after `attempt` (1-based), before jitter.
    public func baseDelay(afterAttempt attempt: Int) -> Double {
        backoff.baseSeconds(afterFailure: attempt)
    }

    /// The delay before the next attempt, with jitter drawn from `random` (a value in [0, 1)).
    public func delay(afterAttempt attempt: Int, random: Double) -> Double {
        backoff.seconds(afterFailure: attempt, random: random)
    }

    /// The schedule as a ``Backoff`` (the steps, proportional jitter).
    public var backoff: Backoff { .steps(delays, jitter: .proportional(jitter)) }
}
