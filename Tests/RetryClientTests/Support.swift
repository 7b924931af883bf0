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

/// Polls `condition` every 10 ms until it holds, for an event a test can only observe as a
/// counter (bytes a server received); false when it still does not hold after `limit`, a bound
/// that keeps a broken test from hanging, not a measurement.
func eventually(within limit: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}

/// A result handed from a task to the test, thread-safely.
final class ResultBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<T, any Error>?

    func set(_ result: Result<T, any Error>) { lock.withLock { self.result = result } }

    /// The result, or an error when none was set.
    func get() throws -> T {
        guard let result = lock.withLock({ result }) else { throw SampleError(retryable: false) }
        return try result.get()
    }
}
