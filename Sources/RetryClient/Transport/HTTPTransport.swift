/// Sends one HTTP request and returns what came back: the seam between the retry logic and the
/// network.
///
/// Courier's worker uses ``PooledHTTPTransport``; ``AsyncHTTPClientTransport`` is the other
/// production transport. Tests swap in `StubTransport` (library `RetryClientTesting`) and leave
/// the rest of the client unchanged.
public protocol HTTPTransport: Sendable {
    /// Sends `request` once, without retrying.
    ///
    /// - Returns: The response summary for any status, including 4xx and 5xx.
    /// - Throws: A ``TransportError`` when no HTTP response was received. Callers treat any
    ///   other error as ``TransportError/Kind/other``.
    func send(_ request: OutboundRequest) async throws -> HTTPResponseSummary
}
