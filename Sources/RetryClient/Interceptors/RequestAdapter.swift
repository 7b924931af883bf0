/// Changes a request before each attempt: adds credentials, a signature, a timestamp.
///
/// The original request is adapted afresh on every attempt, so per-attempt values (a signing
/// timestamp, a refreshed token) are always current.
public protocol RequestAdapter: Sendable {
    /// Returns the request to send for the attempt described by `context`.
    ///
    /// - Throws: Any error; the attempt then fails with ``AttemptFailure/adapter(_:)`` without
    ///   being sent, and the retriers decide what happens.
    func adapt(_ request: OutboundRequest, context: AttemptContext) async throws -> OutboundRequest
}

/// Decides whether a failed attempt is tried again, and when.
public protocol RequestRetrier: Sendable {
    /// Decides about the failed attempt `context.attempt` of `request`.
    ///
    /// - Parameters:
    ///   - request: The request as it was sent (after adapters), or the original one when an
    ///     adapter failed.
    ///   - context: The attempt number and the failures of the earlier attempts of this call;
    ///     the history lets a retrier refuse a second identical failure (as ``Authenticator``
    ///     does for a 401 right after a token refresh).
    ///   - failure: What went wrong.
    func retry(_ request: OutboundRequest, context: AttemptContext, failure: AttemptFailure) async -> RetryDecision
}

/// Adapters and retriers combined, after Alamofire's `Interceptor`.
///
/// Adapters run in order, each receiving the previous one's output. Retriers are asked in order;
/// the first answer other than ``RetryDecision/doNotRetry`` wins.
public struct Interceptor: RequestAdapter, RequestRetrier {
    /// The adapters, run in this order.
    public var adapters: [any RequestAdapter]
    /// The retriers, asked in this order.
    public var retriers: [any RequestRetrier]

    /// Creates an interceptor. Both lists default to empty: no adaptation, no retry.
    public init(adapters: [any RequestAdapter] = [], retriers: [any RequestRetrier] = []) {
        self.adapters = adapters
        self.retriers = retriers
    }

    /// Runs every adapter in order.
    public func adapt(_ request: OutboundRequest, context: AttemptContext) async throws -> OutboundRequest {
        var current = request
        for adapter in adapters {
            current = try await adapter.adapt(current, context: context)
        }
        return current
    }

    /// Asks the retriers in order and returns the first decision other than
    /// ``RetryDecision/doNotRetry``, or `.doNotRetry` if all decline.
    public func retry(_ request: OutboundRequest, context: AttemptContext, failure: AttemptFailure) async
        -> RetryDecision
    {
        for retrier in retriers {
            let decision = await retrier.retry(request, context: context, failure: failure)
            if decision != .doNotRetry { return decision }
        }
        return .doNotRetry
    }
}
