/// What a delivery attempt came to, as the queue sees it.
public enum DeliveryResult: Sendable, Equatable {
    /// A 2xx response.
    case delivered(status: Int)
    /// A failure worth retrying later (transport error, timeout, 408, 425, 429, 5xx).
    /// `retryAfter` is the server's `Retry-After` in seconds, when it sent one.
    case retryable(status: Int?, error: String, retryAfter: Double?)
    /// A failure that retrying cannot fix (other 4xx, 3xx, invalid URL, refused target).
    case permanent(status: Int?, error: String)

    /// The HTTP status, when there was a response.
    public var status: Int? {
        switch self {
        case .delivered(let status): return status
        case .retryable(let status, _, _), .permanent(let status, _): return status
        }
    }

    /// The error text, nil on success.
    public var error: String? {
        switch self {
        case .delivered: return nil
        case .retryable(_, let error, _), .permanent(_, let error): return error
        }
    }
}

/// The state a running job moves to after an attempt (docs/state-machine.md).
public enum JobTransition: Sendable, Equatable {
    /// `running → succeeded`.
    case succeed
    /// `running → retrying`, due after `delay` seconds.
    case retry(delay: Double)
    /// `running → dead`, with the reason kept in `last_error`.
    case dead(reason: String)

    /// The target state.
    public var state: JobState {
        switch self {
        case .succeed: return .succeeded
        case .retry: return .retrying
        case .dead: return .dead
        }
    }

    /// The longest wait a server's `Retry-After` may impose (default one day).
    public static let maximumRetryAfter: Double = 24 * 3600

    /// Decides the transition after attempt `attempt` of `maxAttempts`.
    ///
    /// A retry waits for the schedule's delay (with jitter) or the server's `Retry-After`,
    /// whichever is later; `Retry-After` may lengthen the wait up to `maximumRetryAfter`, never
    /// shorten it.
    ///
    /// - Parameter random: a value in [0, 1) for the jitter (injected so tests are exact).
    public static func decide(
        result: DeliveryResult, attempt: Int, maxAttempts: Int, schedule: RetrySchedule, random: Double
    ) -> JobTransition {
        switch result {
        case .delivered:
            return .succeed
        case .permanent(_, let error):
            return .dead(reason: error)
        case .retryable(_, let error, let retryAfter):
            guard attempt < maxAttempts else {
                return .dead(reason: "attempts exhausted (\(attempt) of \(maxAttempts)): \(error)")
            }
            let scheduled = schedule.delay(afterAttempt: attempt, random: random)
            let serverAsked = min(max(retryAfter ?? 0, 0), maximumRetryAfter)
            return .retry(delay: max(scheduled, serverAsked))
        }
    }
}
