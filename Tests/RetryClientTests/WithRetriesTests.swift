import Foundation
import RetryClient
import XCTest

final class WithRetriesTests: XCTestCase {
    func testAsyncRetriesUntilSuccessCountingAttempts() async throws {
        let attempts = Counter()
        let result = try await withRetries(
            maxAttempts: 5,
            backoff: { _ in .milliseconds(1) },
            isRetryable: { ($0 as? SampleError)?.retryable == true }
        ) {
            if attempts.increment() < 3 { throw SampleError(retryable: true) }
            return "ok"
        }
        XCTAssertEqual(result, "ok")
        XCTAssertEqual(attempts.value, 3)
    }

    func testAsyncRethrowsTheLastErrorWhenAttemptsAreUsedUp() async {
        let attempts = Counter()
        var backoffsAskedFor: [Int] = []
        do {
            _ = try await withRetries(
                maxAttempts: 4,
                backoff: { n in
                    backoffsAskedFor.append(n)
                    return .zero
                },
                isRetryable: { _ in true }
            ) { () async throws -> Int in
                attempts.increment()
                throw SampleError(retryable: true)
            }
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(error as? SampleError, SampleError(retryable: true))
        }
        XCTAssertEqual(attempts.value, 4)
        XCTAssertEqual(backoffsAskedFor, [1, 2, 3])
    }

    func testAsyncStopsAtOnceOnANonRetryableError() async {
        let attempts = Counter()
        do {
            _ = try await withRetries(
                maxAttempts: 5,
                backoff: { _ in .seconds(10) },
                isRetryable: { ($0 as? SampleError)?.retryable == true }
            ) { () async throws -> Int in
                attempts.increment()
                throw SampleError(retryable: false)
            }
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(error as? SampleError, SampleError(retryable: false))
        }
        XCTAssertEqual(attempts.value, 1)
    }

    func testCancellationStopsALongAsyncWait() async {
        let attempts = Counter()
        let task = Task {
            try await withRetries(
                maxAttempts: 10,
                backoff: { _ in .seconds(3600) },
                isRetryable: { _ in true }
            ) { () async throws -> Int in
                attempts.increment()
                throw SampleError(retryable: true)
            }
        }
        try? await Task.sleep(for: .milliseconds(100))
        let started = ContinuousClock.now
        task.cancel()
        let result = await task.result
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1))
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertEqual(attempts.value, 1)
    }

    func testSyncRetriesUntilSuccessCountingAttempts() throws {
        var attempts = 0
        let started = ContinuousClock.now
        let result = try withRetriesSync(
            maxAttempts: 5,
            backoff: { _ in .milliseconds(20) },
            isRetryable: { _ in true }
        ) {
            attempts += 1
            if attempts < 4 { throw SampleError(retryable: true) }
            return attempts
        }
        XCTAssertEqual(result, 4)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(60))
    }

    func testSyncStopsAtOnceOnANonRetryableErrorAndAfterMaxAttempts() {
        var attempts = 0
        XCTAssertThrowsError(
            try withRetriesSync(maxAttempts: 5, backoff: { _ in .zero }, isRetryable: { _ in false }) {
                () throws -> Int in
                attempts += 1
                throw SampleError(retryable: false)
            }
        )
        XCTAssertEqual(attempts, 1)
        attempts = 0
        XCTAssertThrowsError(
            try withRetriesSync(maxAttempts: 3, backoff: { _ in .zero }, isRetryable: { _ in true }) {
                () throws -> Int in
                attempts += 1
                throw SampleError(retryable: true)
            }
        ) { XCTAssertEqual($0 as? SampleError, SampleError(retryable: true)) }
        XCTAssertEqual(attempts, 3)
    }

    func testSyncStopRequestEndsALongWait() {
        let stop = Counter()
        let stopper = Thread {
            usleep(100_000)
            stop.increment()
        }
        stopper.start()
        var attempts = 0
        let started = ContinuousClock.now
        XCTAssertThrowsError(
            try withRetriesSync(
                maxAttempts: 10,
                backoff: { _ in .seconds(3600) },
                isRetryable: { _ in true },
                shouldStop: { stop.value > 0 }
            ) { () throws -> Int in
                attempts += 1
                throw SampleError(retryable: true)
            }
        ) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1))
        XCTAssertEqual(attempts, 1)
    }
}
