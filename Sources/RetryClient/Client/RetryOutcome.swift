/// How one call of ``RetryingClient/send(_:)`` ended.
public enum RetryOutcome: Sendable {
    /// A 2xx response arrived on attempt `attempts`.
    case delivered(HTTPResponseSummary, attempts: Int)
    /// The request should be tried again, but later than the client waits in process: the
    /// caller (the queue) schedules it `after` from now.
    case retryLater(after: Duration, reason: String, last: AttemptFailure, attempts: Int)
    /// The request failed for good: a permanent failure, a retrier's refusal or the retry limit.
    case gaveUp(reason: String, last: AttemptFailure, attempts: Int)

    /// The number of attempts made in this call.
    public var attempts: Int {
        switch self {
        case .delivered(_, let attempts), .retryLater(_, _, _, let attempts), .gaveUp(_, _, let attempts):
            return attempts
        }
    }

    /// The last response received, whether a success or not; `nil` if the last attempt got none.
    public var lastResponse: HTTPResponseSummary? {
        switch self {
        case .delivered(let response, _): return response
        case .retryLater(_, _, let last, _), .gaveUp(_, let last, _): return last.response
        }
    }

    /// The delay asked for by ``retryLater(after:reason:last:attempts:)``, else `nil`.
    public var retryDelay: Duration? {
        if case .retryLater(let after, _, _, _) = self { return after }
        return nil
    }

    /// The raw `Retry-After` header of the last response, if it had one.
    public var retryAfterHeader: String? { lastResponse?.header("Retry-After") }
}
