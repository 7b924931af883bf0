import RetryClient

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
    /// `running → retrying` (or `pending` before any counted attempt), due after `delay` seconds,
    /// without spending the attempt: the receiver asked us to come back later (429 or 503 with
    /// `Retry-After`). Counts one of the job's postponements.
    case postpone(delay: Double)
    /// `running → retrying` (or `pending`), due at once, without spending the attempt: the
    /// receiver answered `410 Gone`, the destination is disabled and its jobs wait, parked,
    /// until an operator enables it again.
    case park(reason: String)

    /// The target state (`retrying` for a postponed or parked job that had counted attempts
    /// before this one; the outcome statement makes it `pending` otherwise).
    public var state: JobState {
        switch self {
        case .succeed: return .succeeded
        case .retry, .postpone, .park: return .retrying
        case .dead: return .dead
        }
    }

    /// False when the attempt is given back (postponed or parked): the receiver's answer said
    /// nothing about the job itself.
    public var spendsAttempt: Bool {
        switch self {
        case .postpone, .park: return false
        case .succeed, .retry, .dead: return true
        }
    }

    /// The most times one job may be postponed by a receiver's 429 or 503 with `Retry-After`
    /// without spending an attempt; after that such an answer is an ordinary failed attempt.
    public static let maximumPostponements = 20

    /// The longest wait a server's `Retry-After` may impose (default one day).
    public static let maximumRetryAfter: Double = 24 * 3600

    /// Decides the transition after attempt `attempt` of `maxAttempts`.
    ///
    /// A retry waits for the schedule's delay (with jitter) or the server's `Retry-After`,
    /// whichever is later; `Retry-After` may lengthen the wait up to `maximumRetryAfter`, never
    /// shorten it.
    ///
    /// The receiver's own signals come first: `410 Gone` parks the job (its destination is
    /// disabled); `429` or `503` with `Retry-After` postpones it without spending an attempt,
    /// at most `maximumPostponements` times per job.
    ///
    /// - Parameters:
    ///   - postponements: how often this job was postponed already.
    ///   - parkOnGone: false when the destination is shared and a 410 must only end this job.
    ///   - random: a value in [0, 1) for the jitter (injected so tests are exact).
    public static func decide(
        result: DeliveryResult, attempt: Int, maxAttempts: Int, schedule: RetrySchedule, postponements: Int = 0,
        parkOnGone: Bool = true, random: Double
    ) -> JobTransition {
        // Which statuses park or postpone is `DeliveryPolicy`'s decision; what is decided here
        // depends on the job: attempts left, its schedule, its postponements, its host.
        switch result {
        case .delivered:
            return .succeed
        case .permanent(let status, let error):
            if let status, DeliveryPolicy.verdict(status: status).durable == .park, parkOnGone {
                return .park(reason: "parked: the destination answered \(status == 410 ? "410 Gone" : "HTTP \(status)") and is disabled")
            }
            return .dead(reason: error)
        case .retryable(let status?, _, let retryAfter?)
        where DeliveryPolicy.verdict(status: status, retryAfter: true).durable == .postpone
            && postponements < maximumPostponements:
            return .postpone(delay: min(max(retryAfter, 0), maximumRetryAfter))
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

/// What one attempt's outcome says about its destination (the receiver as a whole), for the
/// failure streak, the circuit breaker and 410 Gone (docs/destinations.md).
public enum DestinationSignal: String, Sendable, Equatable {
    /// The receiver answered (2xx, or a 4xx about the request): the streak ends, an open
    /// breaker closes.
    case answered
    /// The receiver failed: 5xx, 408, a timeout or a connection error. Counts towards the
    /// breaker's threshold.
    case failed
    /// `410 Gone`: the destination is disabled.
    case gone
    /// Nothing about the receiver: a refused target, a request we could not build, a 429, a
    /// delivery cut off by the worker's shutdown.
    case none

    /// Classifies a delivery result: a response by `DeliveryPolicy`'s receiver signal for its
    /// status; without one, a retryable failure failed the receiver and a permanent one (a
    /// refused target, an invalid request) says nothing about it.
    public static func of(_ result: DeliveryResult) -> DestinationSignal {
        switch result {
        case .delivered(let status):
            return DestinationSignal(rawValue: DeliveryPolicy.verdict(status: status).receiver.rawValue) ?? .answered
        case .permanent(let status?, _):
            return DestinationSignal(rawValue: DeliveryPolicy.verdict(status: status).receiver.rawValue) ?? .answered
        case .retryable(let status?, _, let retryAfter):
            let verdict = DeliveryPolicy.verdict(status: status, retryAfter: retryAfter != nil)
            return DestinationSignal(rawValue: verdict.receiver.rawValue) ?? .failed
        case .permanent(nil, _):
            return .none
        case .retryable(nil, _, _):
            return .failed
        }
    }
}
