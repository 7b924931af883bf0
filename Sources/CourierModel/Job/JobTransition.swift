/// The state a running job moves to after an attempt (docs/state-machine.md).
public enum JobTransition: Sendable, Equatable {
    /// `running → succeeded`.
    case succeed
    /// `running → retrying`, due after `delay`.
    case retry(delay: Duration)
    /// `running → dead`, with the reason kept in `last_error`.
    case dead(reason: String)
    /// `running → retrying` (or `pending` before any counted attempt), due after `delay`,
    /// without spending the attempt: the receiver asked us to come back later (429 or 503 with
    /// `Retry-After`). Counts one of the job's postponements.
    case postpone(delay: Duration)
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

    /// Decides the transition after attempt `attempt` of `maxAttempts` from the delivery's
    /// verdict, adding only what depends on the job.
    ///
    /// The verdict's durable action says what kind of move it is (``DeliveryPolicy``); here
    /// it meets the job: a retry waits for the schedule's delay (with jitter) or the server's
    /// `Retry-After`, whichever is later (`Retry-After` may lengthen the wait up to
    /// ``Defaults/maximumRetryAfter``, never shorten it), and is dead when no attempt is left;
    /// a postponement is allowed ``Defaults/maximumPostponements`` times per job, then it is
    /// an ordinary retry; a park (410 Gone) ends the job as dead where its host is shared.
    ///
    /// - Parameters:
    ///   - postponements: how often this job was postponed already.
    ///   - parkOnGone: false when the destination is shared and a 410 must only end this job.
    ///   - random: a value in [0, 1) for the jitter (injected so tests are exact).
    public static func decide(
        _ delivery: Delivery, attempt: Int, maxAttempts: Int, schedule: RetrySchedule, postponements: Int = 0,
        parkOnGone: Bool = true, random: Double
    ) -> JobTransition {
        if delivery.verdict.durable == .succeed { return .succeed }
        let error = delivery.error ?? "HTTP \(delivery.status.map(String.init) ?? "-")"
        switch delivery.verdict.durable {
        case .succeed:
            return .succeed
        case .dead:
            return .dead(reason: error)
        case .park:
            guard parkOnGone else { return .dead(reason: error) }
            let answer = delivery.status == 410 ? "410 Gone" : "HTTP \(delivery.status.map(String.init) ?? "-")"
            return .park(reason: "parked: the destination answered \(answer) and is disabled")
        case .postpone where delivery.retryAfter != nil && postponements < Defaults.maximumPostponements:
            return .postpone(delay: min(max(delivery.retryAfter ?? .zero, .zero), Defaults.maximumRetryAfter))
        case .postpone, .retryLater, .retryNow:
            guard attempt < maxAttempts else {
                return .dead(reason: "attempts exhausted (\(attempt) of \(maxAttempts)): \(error)")
            }
            let scheduled = schedule.delay(afterAttempt: attempt, random: random)
            let serverAsked = min(max(delivery.retryAfter ?? .zero, .zero), Defaults.maximumRetryAfter)
            return .retry(delay: max(scheduled, serverAsked))
        }
    }
}
