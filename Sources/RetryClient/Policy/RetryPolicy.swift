import Foundation

/// The standard retrier: retries transient failures with capped exponential backoff and jitter,
/// honouring `Retry-After`.
///
/// The delay after failed attempt `n` is `exponentialBackoffScale × exponentialBackoffBase^(n-1)`,
/// capped at ``maximumBackoff``, then jittered, then capped again, so no delay ever exceeds the
/// cap. With the defaults: 0.5 s, 1 s, 2 s, 4 s, 8 s, each ×[0.8, 1.2].
public struct RetryPolicy: RequestRetrier {
    /// How the computed delay is randomized (see ``Backoff/Jitter``).
    public typealias Jitter = Backoff.Jitter

    /// Every method the client sends, so `POST` included.
    ///
    /// Webhooks are POSTs and must be retried; it is safe because every delivery carries a
    /// stable `webhook-id` that receivers use to drop duplicates.
    public static let allMethods: Set<String> = ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE", "POST", "PATCH"]

    /// The statuses worth retrying: those ``DeliveryPolicy`` retries (408, 425, 429, and 5xx
    /// but 501 and 505).
    public static let defaultRetryableStatusCodes: Set<Int> = DeliveryPolicy.retriedStatuses

    /// The transport failures worth retrying: those ``DeliveryPolicy`` retries (all but TLS
    /// failures and invalid requests, which fail the same way again).
    public static let defaultRetryableTransportErrorKinds: Set<TransportError.Kind> = DeliveryPolicy.retriedTransportKinds

    /// Retries after the first attempt; `5` means at most 6 attempts in all. Default 5.
    public var retryLimit: Int
    /// The growth factor between consecutive delays. Default 2.
    public var exponentialBackoffBase: Double
    /// The delay after the first failed attempt, before jitter. Default 0.5 s.
    public var exponentialBackoffScale: Duration
    /// The longest computed delay, applied before and after jitter. Default 60 s.
    public var maximumBackoff: Duration
    /// How delays are randomized. Default `.proportional(0.2)`, i.e. ×[0.8, 1.2].
    public var jitter: Jitter
    /// Methods that may be retried, upper case. Default ``allMethods`` (see there for why).
    public var retryableHTTPMethods: Set<String>
    /// Statuses that are retried. Default ``defaultRetryableStatusCodes``; every other non-2xx
    /// status is final.
    public var retryableStatusCodes: Set<Int>
    /// Transport failures that are retried. Default ``defaultRetryableTransportErrorKinds``.
    public var retryableTransportErrorKinds: Set<TransportError.Kind>
    /// The longest `Retry-After` that is honoured; longer values are cut to it. Default 24 h.
    public var maximumRetryAfter: Duration
    /// The randomness of the jitter. Default ``RandomSource/system``.
    public var randomSource: RandomSource
    /// The wall clock used to turn a `Retry-After` HTTP-date into a delay. Default `Date()`.
    public var now: @Sendable () -> Date

    /// Creates a policy; every parameter defaults to the value documented on its property.
    public init(
        retryLimit: Int = 5,
        exponentialBackoffBase: Double = 2,
        exponentialBackoffScale: Duration = .milliseconds(500),
        maximumBackoff: Duration = .seconds(60),
        jitter: Jitter = .proportional(0.2),
        retryableHTTPMethods: Set<String> = RetryPolicy.allMethods,
        retryableStatusCodes: Set<Int> = RetryPolicy.defaultRetryableStatusCodes,
        retryableTransportErrorKinds: Set<TransportError.Kind> = RetryPolicy.defaultRetryableTransportErrorKinds,
        maximumRetryAfter: Duration = Defaults.maximumRetryAfter,
        randomSource: RandomSource = .system,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.retryLimit = retryLimit
        self.exponentialBackoffBase = exponentialBackoffBase
        self.exponentialBackoffScale = exponentialBackoffScale
        self.maximumBackoff = maximumBackoff
        self.jitter = jitter
        self.retryableHTTPMethods = Set(retryableHTTPMethods.map { $0.uppercased() })
        self.retryableStatusCodes = retryableStatusCodes
        self.retryableTransportErrorKinds = retryableTransportErrorKinds
        self.maximumRetryAfter = maximumRetryAfter
        self.randomSource = randomSource
        self.now = now
    }

    /// The backoff these settings describe: exponential from ``exponentialBackoffScale`` by
    /// ``exponentialBackoffBase``, capped at ``maximumBackoff``, with ``jitter``.
    public var backoff: Backoff {
        .exponential(
            initial: exponentialBackoffScale, base: exponentialBackoffBase, maximum: maximumBackoff, jitter: jitter)
    }

    /// The delay before the attempt after failed attempt `n` (1-based), jitter drawn from `rng`.
    ///
    /// Pure: the same policy, `n` and generator state give the same delay.
    public func delay<G: RandomNumberGenerator>(forAttempt n: Int, using rng: inout G) -> Duration {
        backoff.delay(afterFailure: n, using: &rng)
    }

    /// The delay after failed attempt `n`, jitter drawn from ``randomSource``.
    public func delay(forAttempt n: Int) -> Duration {
        var rng = RandomSourceGenerator(source: randomSource)
        return delay(forAttempt: n, using: &rng)
    }

    /// Retries retryable statuses and transport failures of retryable methods until
    /// ``retryLimit`` retries were made.
    ///
    /// - Returns: `.retryAfter(delay)` with the backoff delay, lengthened (never shortened) to a
    ///   response's `Retry-After` capped at ``maximumRetryAfter``; `.doNotRetry` for anything
    ///   not retryable (adapter failures, other 4xx, TLS failures...);
    ///   `.doNotRetryWithError("retry limit reached after N attempts: …")` when the limit is hit.
    public func retry(_ request: OutboundRequest, context: AttemptContext, failure: AttemptFailure) async
        -> RetryDecision
    {
        guard isRetryable(failure), retryableHTTPMethods.contains(request.method.uppercased()) else {
            return .doNotRetry
        }
        guard context.attempt <= retryLimit else {
            return .doNotRetryWithError(reason: "retry limit reached after \(context.attempt) attempts: \(failure)")
        }
        var wait = delay(forAttempt: context.attempt)
        if let value = failure.response?.header("Retry-After"),
            let requested = Self.parseRetryAfter(value, now: now())
        {
            wait = max(wait, min(requested, maximumRetryAfter))
        }
        return .retryAfter(wait)
    }

    /// Whether `failure` is of a retryable kind, ignoring method and limit.
    public func isRetryable(_ failure: AttemptFailure) -> Bool {
        switch failure {
        case .response(let response): return retryableStatusCodes.contains(response.status)
        case .transport(let error): return retryableTransportErrorKinds.contains(error.kind)
        case .adapter: return false
        }
    }
}
