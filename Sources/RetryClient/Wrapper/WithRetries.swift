#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs `operation` until it succeeds, its error is not retryable, or `maxAttempts` attempts
/// were made; waits `backoff(n)` after failed attempt `n`.
///
/// For any throwing work, not only HTTP: the database layer reuses it for reconnects.
/// A `CancellationError` is never retried, and cancelling the task interrupts a wait at once,
/// throwing `CancellationError`.
///
/// - Parameters:
///   - maxAttempts: Attempts in all, at least 1 (smaller values count as 1).
///   - backoff: The wait after failed attempt `n` (1-based), e.g.
///     `{ policy.delay(forAttempt: $0) }`.
///   - isRetryable: Whether an error is worth another attempt.
///   - operation: The work.
/// - Returns: The first successful result.
/// - Throws: The first non-retryable error, the last error when the attempts are used up, or
///   `CancellationError`.
public func withRetries<T>(
    isolation: isolated (any Actor)? = #isolation,
    maxAttempts: Int,
    backoff: (Int) -> Duration,
    isRetryable: (any Error) -> Bool,
    operation: () async throws -> T
) async throws -> T {
    let limit = max(1, maxAttempts)
    var attempt = 0
    while true {
        attempt += 1
        try Task.checkCancellation()
        do {
            return try await operation()
        } catch {
            if error is CancellationError || attempt >= limit || !isRetryable(error) { throw error }
            let wait = backoff(attempt)
            if wait > .zero { try await Task.sleep(for: wait) }
        }
    }
}

/// The blocking variant of ``withRetries(isolation:maxAttempts:backoff:isRetryable:operation:)``
/// for synchronous code on its own thread.
///
/// The wait sleeps the thread in slices of at most 50 ms and calls `shouldStop` between slices,
/// so a stop request (e.g. a shutdown flag) ends the wait quickly; it then throws
/// `CancellationError`. It also stops if called inside a task that is cancelled.
///
/// - Parameters:
///   - maxAttempts: Attempts in all, at least 1.
///   - backoff: The wait after failed attempt `n` (1-based).
///   - isRetryable: Whether an error is worth another attempt.
///   - shouldStop: Polled during waits; `true` abandons the retries. Default: never.
///   - operation: The work.
public func withRetriesSync<T>(
    maxAttempts: Int,
    backoff: (Int) -> Duration,
    isRetryable: (any Error) -> Bool,
    shouldStop: () -> Bool = { false },
    operation: () throws -> T
) throws -> T {
    let limit = max(1, maxAttempts)
    var attempt = 0
    while true {
        attempt += 1
        do {
            return try operation()
        } catch {
            if error is CancellationError || attempt >= limit || !isRetryable(error) { throw error }
            let clock = ContinuousClock()
            let end = clock.now + backoff(attempt)
            while clock.now < end {
                if shouldStop() || Task.isCancelled { throw CancellationError() }
                let left = end - clock.now
                let slice = min(left, .milliseconds(50))
                usleep(useconds_t(max(1, slice.inSeconds * 1_000_000)))
            }
            if shouldStop() || Task.isCancelled { throw CancellationError() }
        }
    }
}
