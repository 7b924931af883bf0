/// A bearer token and when it stops being usable.
public struct AccessToken: Sendable, Equatable {
    /// The token, sent as `Authorization: Bearer <value>`.
    public var value: String
    /// When the token should no longer be sent (already shortened by the refresh margin), or
    /// `nil` when it is used until a server rejects it.
    public var usableUntil: ContinuousClock.Instant?

    /// Creates a token.
    public init(value: String, usableUntil: ContinuousClock.Instant? = nil) {
        self.value = value
        self.usableUntil = usableUntil
    }

    /// A token that lives `lifetime` from `now`, used until shortly before it ends: 10 % of its
    /// lifetime earlier, but never more than 30 s earlier (a one-hour token is replaced after
    /// 59:30, a one-minute token after 54 s).
    public static func expiring(
        _ value: String, in lifetime: Duration, now: ContinuousClock.Instant = .now
    ) -> AccessToken {
        let margin = min(lifetime / 10, .seconds(30))
        return AccessToken(value: value, usableUntil: now + max(.zero, lifetime - margin))
    }

    /// Whether the token may still be sent at `now`.
    public func isUsable(at now: ContinuousClock.Instant = .now) -> Bool {
        usableUntil.map { now < $0 } ?? true
    }
}

/// Attaches a bearer token, obtains a new one when it is missing or about to expire, and
/// refreshes it once when the server answers 401.
///
/// Token fetching is single-flight: concurrent requests that need a token (the first ones, or
/// all of them after it expired, or after a 401) share one fetch; the first starts it, the
/// others await the same task. A request that was sent with a token that has since been
/// replaced retries with the new one without refreshing again. A 401 for a request that was
/// just retried after a 401 is final (no refresh loop).
///
/// Two ways to make one:
/// - ``init(token:refresh:)``: a token you have; on a 401 the retrier refreshes and a failed
///   refresh ends the call with `"token refresh failed: …"`.
/// - ``init(fetch:)``: no token yet (e.g. OAuth2 client credentials, see
///   ``OAuth2ClientCredentials``); the adapter fetches one before the first request and again
///   once ``AccessToken/usableUntil`` has passed, and a 401 discards the token so the retry's
///   adapter fetches a new one. A failed fetch fails the attempt as
///   ``AttemptFailure/adapter(_:)`` carrying the fetch's own error, so the caller can tell an
///   unreachable token endpoint from rejected credentials.
///
/// Use it as both an adapter and a retrier of the same ``Interceptor``, placed before the
/// ``RetryPolicy`` among the retriers (the policy declines 401).
public actor Authenticator: RequestAdapter, RequestRetrier {
    /// The token attached to requests now; `nil` before the first fetch or after a 401.
    public var token: String? { current?.value }
    /// How many refreshes (fetches) were started; for metrics and tests.
    public private(set) var refreshCount = 0
    private var current: AccessToken?
    private let fetch: @Sendable () async throws -> AccessToken
    /// True for ``init(token:refresh:)``: the retrier refreshes after a 401 itself.
    private let refreshesInRetrier: Bool
    private var refreshTask: Task<AccessToken, any Error>?
    private let now: @Sendable () -> ContinuousClock.Instant

    /// Creates an authenticator with a token in hand.
    ///
    /// - Parameters:
    ///   - token: The current bearer token.
    ///   - refresh: Obtains a new token; called at most once at a time.
    public init(token: String, refresh: @escaping @Sendable () async throws -> String) {
        self.current = AccessToken(value: token)
        self.fetch = { AccessToken(value: try await refresh()) }
        self.refreshesInRetrier = true
        self.now = { .now }
    }

    /// Creates an authenticator that fetches its tokens itself.
    ///
    /// - Parameters:
    ///   - now: The clock the expiry is compared with (tests move it). Default: now.
    ///   - fetch: Obtains a token; called at most once at a time.
    public init(
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        fetch: @escaping @Sendable () async throws -> AccessToken
    ) {
        self.current = nil
        self.fetch = fetch
        self.refreshesInRetrier = false
        self.now = now
    }

    /// Sets `Authorization: Bearer <token>`, replacing any earlier value; fetches a token first
    /// when there is none or it is no longer usable.
    public func adapt(_ request: OutboundRequest, context: AttemptContext) async throws -> OutboundRequest {
        let token: AccessToken
        if let current, current.isUsable(at: now()) {
            token = current
        } else {
            token = try await refreshed()
        }
        var adapted = request
        adapted.headers["Authorization"] = "Bearer \(token.value)"
        return adapted
    }

    /// Handles 401 responses only; everything else gets `.doNotRetry` so later retriers decide.
    public func retry(_ request: OutboundRequest, context: AttemptContext, failure: AttemptFailure) async
        -> RetryDecision
    {
        guard failure.response?.status == 401 else { return .doNotRetry }
        if context.previousFailures.last?.response?.status == 401 {
            return .doNotRetryWithError(reason: "still unauthorized (HTTP 401) after a token refresh")
        }
        let sent = request.headers["Authorization"]
        guard let current, sent == "Bearer \(current.value)" else {
            // Another request already replaced (or discarded) the token this one was sent with.
            return .retry
        }
        guard refreshesInRetrier else {
            // The retry's adapter fetches a new token (shared with every other request).
            self.current = nil
            return .retry
        }
        do {
            _ = try await refreshed()
            return .retry
        } catch {
            return .doNotRetryWithError(reason: "token refresh failed: \(error)")
        }
    }

    /// The result of the running fetch, or of a new one.
    private func refreshed() async throws -> AccessToken {
        let task: Task<AccessToken, any Error>
        if let running = refreshTask {
            task = running
        } else {
            refreshCount += 1
            let fetch = self.fetch
            task = Task { try await fetch() }
            refreshTask = task
        }
        do {
            let fresh = try await task.value
            if refreshTask == task {
                current = fresh
                refreshTask = nil
            }
            return fresh
        } catch {
            if refreshTask == task { refreshTask = nil }
            throw error
        }
    }
}
