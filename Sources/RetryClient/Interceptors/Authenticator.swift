/// Attaches a bearer token and refreshes it once when the server answers 401.
///
/// Concurrent requests that meet a 401 share one refresh: the first starts it, the others await
/// the same task. A request that was sent with a token that has since been replaced retries with
/// the new one without refreshing again. A 401 for a request that was just retried after a 401
/// is final (no refresh loop), and a failed refresh ends the call with
/// `"token refresh failed: …"`.
///
/// Use it as both an adapter and a retrier of the same ``Interceptor``, placed before the
/// ``RetryPolicy`` among the retriers (the policy declines 401).
public actor Authenticator: RequestAdapter, RequestRetrier {
    /// The token attached to every request now.
    public private(set) var token: String
    /// How many refreshes were started; for metrics and tests.
    public private(set) var refreshCount = 0
    private let refresh: @Sendable () async throws -> String
    private var refreshTask: Task<String, any Error>?

    /// Creates an authenticator.
    ///
    /// - Parameters:
    ///   - token: The current bearer token.
    ///   - refresh: Obtains a new token; called at most once at a time.
    public init(token: String, refresh: @escaping @Sendable () async throws -> String) {
        self.token = token
        self.refresh = refresh
    }

    /// Sets `Authorization: Bearer <token>`, replacing any earlier value.
    public func adapt(_ request: OutboundRequest, context: AttemptContext) async throws -> OutboundRequest {
        var adapted = request
        adapted.headers["Authorization"] = "Bearer \(token)"
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
        if sent != "Bearer \(token)" {
            // Another request already replaced the token this one was sent with.
            return .retry
        }
        let task: Task<String, any Error>
        if let running = refreshTask {
            task = running
        } else {
            refreshCount += 1
            let refresh = self.refresh
            task = Task { try await refresh() }
            refreshTask = task
        }
        do {
            let fresh = try await task.value
            if refreshTask == task {
                token = fresh
                refreshTask = nil
            }
            return .retry
        } catch {
            if refreshTask == task { refreshTask = nil }
            return .doNotRetryWithError(reason: "token refresh failed: \(error)")
        }
    }
}
