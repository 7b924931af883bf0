import Foundation

/// Where a request stands in one call of ``RetryingClient/send(_:)``.
public struct AttemptContext: Sendable {
    /// The attempt number within this call, starting at 1.
    public var attempt: Int
    /// When the first attempt of this call started, on the monotonic clock.
    public var firstAttemptStartedAt: ContinuousClock.Instant
    /// When the first attempt of this call started, on the wall clock.
    public var firstAttemptDate: Date
    /// The failures of the earlier attempts of this call, oldest first; empty on attempt 1.
    ///
    /// When handed to a retrier, it does not include the failure being decided on.
    public var previousFailures: [AttemptFailure]

    /// Creates a context.
    public init(
        attempt: Int,
        firstAttemptStartedAt: ContinuousClock.Instant = .now,
        firstAttemptDate: Date = Date(),
        previousFailures: [AttemptFailure] = []
    ) {
        self.attempt = attempt
        self.firstAttemptStartedAt = firstAttemptStartedAt
        self.firstAttemptDate = firstAttemptDate
        self.previousFailures = previousFailures
    }
}

/// Why one attempt did not succeed.
public enum AttemptFailure: Sendable, CustomStringConvertible {
    /// A response arrived with a status other than 2xx (3xx included: redirects are not followed).
    case response(HTTPResponseSummary)
    /// No response arrived.
    case transport(TransportError)
    /// A ``RequestAdapter`` threw before the request was sent.
    case adapter(any Error)

    /// The response, when the failure is one.
    public var response: HTTPResponseSummary? {
        if case .response(let response) = self { return response }
        return nil
    }

    /// The transport error, when the failure is one.
    public var transportError: TransportError? {
        if case .transport(let error) = self { return error }
        return nil
    }

    /// `"HTTP 503 Service Unavailable"`, `"connectRefused: ..."` or `"request adapter failed: ..."`.
    public var description: String {
        switch self {
        case .response(let response): return response.description
        case .transport(let error): return error.description
        case .adapter(let error): return "request adapter failed: \(error)"
        }
    }
}

/// What a retrier wants done after a failed attempt.
public enum RetryDecision: Sendable, Equatable {
    /// Send again at once.
    case retry
    /// Send again after the given delay.
    case retryAfter(Duration)
    /// This retrier has no opinion or declines; the next retrier is asked, and if none retries
    /// the call ends with the failure itself as the reason.
    case doNotRetry
    /// Stop now with this reason; no later retrier is asked.
    case doNotRetryWithError(reason: String)
}
