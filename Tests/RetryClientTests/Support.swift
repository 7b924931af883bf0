import Foundation
import RetryClient

/// A response with `status` and optional headers, for stubs.
func response(_ status: Int, _ headers: HeaderFields = [:]) -> HTTPResponseSummary {
    HTTPResponseSummary(status: status, reason: "", headers: headers)
}

/// A policy with no waiting, so table tests run instantly.
func instantPolicy(
    retryLimit: Int = 5, kinds: Set<TransportError.Kind> = RetryPolicy.defaultRetryableTransportErrorKinds
) -> RetryPolicy {
    RetryPolicy(
        retryLimit: retryLimit,
        exponentialBackoffScale: .zero,
        jitter: .none,
        retryableTransportErrorKinds: kinds
    )
}

/// A thread-safe counter for closures that run concurrently.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    @discardableResult
    func increment() -> Int {
        lock.withLock {
            count += 1
            return count
        }
    }

    var value: Int { lock.withLock { count } }
}

struct SampleError: Error, Equatable {
    var retryable: Bool
}
