/// The delays between attempts of a job: the delay after attempt 1, 2, ...; the last entry
/// repeats when attempts outnumber it. Each delay is multiplied by a uniform jitter factor.
public struct RetrySchedule: Sendable, Equatable {
    /// Delays after attempt 1, 2, ...
    public var delays: [Duration]
    /// Jitter: each delay is multiplied by a factor drawn uniformly from `1 ± jitter`
    /// (default ``Defaults/retryJitter``, i.e. [0.8, 1.2]).
    public var jitter: Double

    /// Creates a schedule; an empty list means "retry at once". `jitter` is clamped to [0, 1].
    public init(delays: [Duration], jitter: Double = Defaults.retryJitter) {
        self.delays = delays
        self.jitter = max(0, min(1, jitter))
    }

    /// The Standard Webhooks example schedule: attempt 1 at once, then 5 s, 5 min, 30 min, 2 h,
    /// 5 h, 10 h, 14 h, 20 h, 24 h — 10 attempts over about three days.
    public static let standardWebhooks = RetrySchedule(delays: [
        .seconds(5), .minutes(5), .minutes(30), .hours(2), .hours(5), .hours(10), .hours(14), .hours(20),
        .hours(24),
    ])

    /// The attempts a job gets when neither the job nor its queue says otherwise.
    public static let defaultMaxAttempts = Defaults.maxAttempts

    /// The delay before the attempt after `attempt` (1-based), before jitter.
    public func baseDelay(afterAttempt attempt: Int) -> Duration {
        backoff.baseDelay(afterFailure: attempt)
    }

    /// The delay before the next attempt, with jitter drawn from `random` (a value in [0, 1)).
    public func delay(afterAttempt attempt: Int, random: Double) -> Duration {
        backoff.delay(afterFailure: attempt, random: random)
    }

    /// The schedule as a ``Backoff`` (the steps, proportional jitter).
    public var backoff: Backoff { .steps(delays, jitter: .proportional(jitter)) }
}

extension Duration {
    /// `n` minutes.
    public static func minutes(_ n: Int) -> Duration { .seconds(n * 60) }
    /// `n` hours.
    public static func hours(_ n: Int) -> Duration { .seconds(n * 3600) }
}
