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
        // `backoff` is asked right before the wait: from then on the task only sleeps.
        let waiting = expectation(description: "the first wait began")
        let task = Task {
            try await withRetries(
                maxAttempts: 10,
                backoff: { _ in
                    waiting.fulfill()
                    return .seconds(3600)
                },
                isRetryable: { _ in true }
            ) { () async throws -> Int in
                attempts.increment()
                throw SampleError(retryable: true)
            }
        }
        await fulfillment(of: [waiting], timeout: 10)
        task.cancel()
        // An hour's wait ends with the cancellation; the bound only keeps a broken build from
        // hanging the run.
        let returned = expectation(description: "the cancelled task returned")
        let result = ResultBox<Int>()
        Task {
            result.set(await task.result)
            returned.fulfill()
        }
        await fulfillment(of: [returned], timeout: 30)
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
        // Another thread asks to stop once the wait is under way (its first poll of
        // `shouldStop`); the poll after that must end the hour's wait.
        let waiting = DispatchSemaphore(value: 0)
        let stop = Counter()
        let polls = Counter()
        let stopper = Thread {
            waiting.wait()
            stop.increment()
        }
        stopper.start()
        var attempts = 0
        // 600 polls of at most 50 ms: a bound that keeps a broken build from hanging the run.
        let pollLimit = 600
        XCTAssertThrowsError(
            try withRetriesSync(
                maxAttempts: 10,
                backoff: { _ in .seconds(3600) },
                isRetryable: { _ in true },
                shouldStop: {
                    if stop.value > 0 { return true }
                    if polls.increment() == 1 { waiting.signal() }
                    return polls.value > pollLimit
                }
            ) { () throws -> Int in
                attempts += 1
                throw SampleError(retryable: true)
            }
        ) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertEqual(stop.value, 1, "the wait ended before the stop was asked for")
        XCTAssertLessThanOrEqual(polls.value, pollLimit, "the stop request was not seen")
        XCTAssertEqual(attempts, 1)
    }
}
