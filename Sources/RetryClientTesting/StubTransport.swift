import Foundation
import RetryClient

/// A test seam: a transport whose answers come from a closure, recording every request.
///
/// The URLProtocol idea: production code stays unchanged, the handler inspects each request and
/// returns a response or throws a `TransportError`. It ships in its own library,
/// `RetryClientTesting`, so users of `RetryClient` can test their code with it without putting
/// a test double into their product.
public final class StubTransport: HTTPTransport, @unchecked Sendable {
    /// Answers request number `callIndex` (0-based, in arrival order).
    public typealias Handler =
        @Sendable (_ request: OutboundRequest, _ callIndex: Int) async throws -> HTTPResponseSummary

    private let handler: Handler
    private let lock = NSLock()
    // Guarded by `lock`.
    private var seen: [OutboundRequest] = []

    /// Creates a stub answering with `handler`.
    public init(handler: @escaping Handler) {
        self.handler = handler
    }

    /// The requests received so far, in arrival order.
    public var requests: [OutboundRequest] {
        lock.withLock { seen }
    }

    /// How many requests were received.
    public var callCount: Int {
        lock.withLock { seen.count }
    }

    /// Records `request` and returns the handler's answer.
    public func send(_ request: OutboundRequest) async throws -> HTTPResponseSummary {
        let index = lock.withLock {
            seen.append(request)
            return seen.count - 1
        }
        return try await handler(request, index)
    }
}
