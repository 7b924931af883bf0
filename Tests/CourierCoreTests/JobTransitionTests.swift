import CourierCore
import XCTest

final class JobTransitionTests: XCTestCase {
    private let schedule = RetrySchedule(delays: [5, 300, 1800], jitter: 0.2)

    func testStandardWebhooksScheduleIsTenAttemptsOverAboutThreeDays() {
        let s = RetrySchedule.standardWebhooks
        XCTAssertEqual(s.delays.count + 1, RetrySchedule.defaultMaxAttempts)
        let total = (1..<RetrySchedule.defaultMaxAttempts).map { s.baseDelay(afterAttempt: $0) }.reduce(0, +)
        XCTAssertEqual(total / 86_400, 3.1, accuracy: 0.1)
        XCTAssertEqual(s.jitter, 0.2)
    }

    func testLastDelayRepeatsWhenAttemptsOutnumberTheSchedule() {
        XCTAssertEqual(schedule.baseDelay(afterAttempt: 1), 5)
        XCTAssertEqual(schedule.baseDelay(afterAttempt: 3), 1800)
        XCTAssertEqual(schedule.baseDelay(afterAttempt: 9), 1800)
        XCTAssertEqual(RetrySchedule(delays: []).baseDelay(afterAttempt: 1), 0)
    }

    func testJitterStaysWithinTwentyPercent() {
        XCTAssertEqual(schedule.delay(afterAttempt: 2, random: 0), 240, accuracy: 1e-9)
        XCTAssertEqual(schedule.delay(afterAttempt: 2, random: 0.5), 300, accuracy: 1e-9)
        XCTAssertEqual(schedule.delay(afterAttempt: 2, random: 1), 360, accuracy: 1e-9)
        for _ in 0..<1000 {
            let d = schedule.delay(afterAttempt: 1, random: Double.random(in: 0..<1))
            XCTAssertTrue((4.0...6.0).contains(d))
        }
    }

    func testSuccessSucceedsOnAnyAttempt() {
        XCTAssertEqual(
            JobTransition.decide(result: .delivered(status: 204), attempt: 10, maxAttempts: 10, schedule: schedule, random: 0.5),
            .succeed)
    }

    func testRetryableFailureWithAttemptsLeftRetriesOnTheSchedule() {
        let result = DeliveryResult.retryable(status: 503, error: "HTTP 503", retryAfter: nil)
        XCTAssertEqual(
            JobTransition.decide(result: result, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: 5))
    }

    func testRetryAfterMayLengthenButNeverShortenTheWait() {
        let longer = DeliveryResult.retryable(status: 429, error: "HTTP 429", retryAfter: 120)
        XCTAssertEqual(
            JobTransition.decide(result: longer, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: 120))
        let shorter = DeliveryResult.retryable(status: 429, error: "HTTP 429", retryAfter: 1)
        XCTAssertEqual(
            JobTransition.decide(result: shorter, attempt: 2, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: 300))
        let huge = DeliveryResult.retryable(status: 429, error: "HTTP 429", retryAfter: 10 * 86_400)
        XCTAssertEqual(
            JobTransition.decide(result: huge, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: JobTransition.maximumRetryAfter))
    }

    func testExhaustedAttemptsGoDeadWithTheLastError() {
        let result = DeliveryResult.retryable(status: 503, error: "HTTP 503 Service Unavailable", retryAfter: nil)
        let transition = JobTransition.decide(result: result, attempt: 3, maxAttempts: 3, schedule: schedule, random: 0.5)
        XCTAssertEqual(transition.state, .dead)
        guard case .dead(let reason) = transition else { return XCTFail() }
        XCTAssertTrue(reason.contains("attempts exhausted (3 of 3)"))
        XCTAssertTrue(reason.contains("HTTP 503"))
    }

    func testPermanentFailureGoesDeadAtOnce() {
        let result = DeliveryResult.permanent(status: 400, error: "HTTP 400 Bad Request")
        XCTAssertEqual(
            JobTransition.decide(result: result, attempt: 1, maxAttempts: 10, schedule: schedule, random: 0.5),
            .dead(reason: "HTTP 400 Bad Request"))
    }

    func testStatesAreAClosedSetMatchingTheDatabaseEnum() {
        XCTAssertEqual(JobState.allCases.map(\.rawValue), ["pending", "running", "retrying", "succeeded", "dead", "cancelled"])
        XCTAssertEqual(JobState.allCases.filter(\.isFinal), [.succeeded, .dead, .cancelled])
        XCTAssertEqual(JobState.allCases.filter(\.isClaimable), [.pending, .retrying])
    }
}
