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
        // Statuses other than 429/503 (and 429/503 past the postponement cap) spend the attempt.
        let longer = DeliveryResult.retryable(status: 500, error: "HTTP 500", retryAfter: 120)
        XCTAssertEqual(
            JobTransition.decide(result: longer, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: 120))
        let shorter = DeliveryResult.retryable(status: 429, error: "HTTP 429", retryAfter: 1)
        XCTAssertEqual(
            JobTransition.decide(
                result: shorter, attempt: 2, maxAttempts: 3, schedule: schedule,
                postponements: JobTransition.maximumPostponements, random: 0.5),
            .retry(delay: 300))
        let huge = DeliveryResult.retryable(status: 502, error: "HTTP 502", retryAfter: 10 * 86_400)
        XCTAssertEqual(
            JobTransition.decide(result: huge, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: JobTransition.maximumRetryAfter))
    }

    func testTooManyRequestsOrUnavailableWithRetryAfterPostponesWithoutSpendingTheAttempt() {
        for status in [429, 503] {
            let result = DeliveryResult.retryable(status: status, error: "HTTP \(status)", retryAfter: 30)
            let transition = JobTransition.decide(
                result: result, attempt: 3, maxAttempts: 3, schedule: schedule, postponements: 4, random: 0.5)
            XCTAssertEqual(transition, .postpone(delay: 30))
            XCTAssertFalse(transition.spendsAttempt)
            XCTAssertEqual(transition.state, .retrying)
        }
        // Without Retry-After it is an ordinary failure.
        let bare = DeliveryResult.retryable(status: 429, error: "HTTP 429", retryAfter: nil)
        XCTAssertEqual(
            JobTransition.decide(result: bare, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: 5))
        // Past the cap the answer spends an attempt, and on the last attempt the job is dead.
        let capped = DeliveryResult.retryable(status: 503, error: "HTTP 503", retryAfter: 30)
        XCTAssertEqual(
            JobTransition.decide(
                result: capped, attempt: 3, maxAttempts: 3, schedule: schedule,
                postponements: JobTransition.maximumPostponements, random: 0.5),
            .dead(reason: "attempts exhausted (3 of 3): HTTP 503"))
        // The server's delay is capped like any Retry-After.
        let far = DeliveryResult.retryable(status: 429, error: "HTTP 429", retryAfter: 1e9)
        XCTAssertEqual(
            JobTransition.decide(result: far, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .postpone(delay: JobTransition.maximumRetryAfter))
    }

    func testGoneParksTheJobWithoutSpendingTheAttempt() {
        let gone = DeliveryResult.permanent(status: 410, error: "HTTP 410")
        let transition = JobTransition.decide(result: gone, attempt: 3, maxAttempts: 3, schedule: schedule, random: 0.5)
        guard case .park = transition else { return XCTFail("410 should park, got \(transition)") }
        XCTAssertFalse(transition.spendsAttempt)
        // A shared host's 410 ends only that job.
        XCTAssertEqual(
            JobTransition.decide(
                result: gone, attempt: 1, maxAttempts: 3, schedule: schedule, parkOnGone: false, random: 0.5),
            .dead(reason: "HTTP 410"))
        XCTAssertEqual(
            JobTransition.decide(
                result: .permanent(status: 404, error: "HTTP 404"), attempt: 1, maxAttempts: 3, schedule: schedule,
                random: 0.5),
            .dead(reason: "HTTP 404"))
    }

    func testDestinationSignals() {
        XCTAssertEqual(DestinationSignal.of(.delivered(status: 204)), .answered)
        XCTAssertEqual(DestinationSignal.of(.permanent(status: 400, error: "HTTP 400")), .answered)
        XCTAssertEqual(DestinationSignal.of(.permanent(status: 410, error: "HTTP 410")), .gone)
        XCTAssertEqual(DestinationSignal.of(.permanent(status: nil, error: "refused: private address")), .none)
        XCTAssertEqual(DestinationSignal.of(.retryable(status: 500, error: "HTTP 500", retryAfter: nil)), .failed)
        XCTAssertEqual(DestinationSignal.of(.retryable(status: 503, error: "HTTP 503", retryAfter: 5)), .failed)
        XCTAssertEqual(DestinationSignal.of(.retryable(status: 408, error: "HTTP 408", retryAfter: nil)), .failed)
        XCTAssertEqual(DestinationSignal.of(.retryable(status: nil, error: "connection reset", retryAfter: nil)), .failed)
        XCTAssertEqual(DestinationSignal.of(.retryable(status: 429, error: "HTTP 429", retryAfter: 5)), .none)
        XCTAssertEqual(DestinationSignal.of(.retryable(status: 425, error: "HTTP 425", retryAfter: nil)), .answered)
    }

    func testDestinationHostNames() {
        XCTAssertEqual(DestinationHost.normalize("Hooks.Example.COM"), "hooks.example.com")
        XCTAssertEqual(DestinationHost.normalize("https://Hooks.example.com:8443/x?y=1"), "hooks.example.com")
        XCTAssertEqual(DestinationHost.normalize("http://[::1]:80/x"), "[::1]")
        XCTAssertEqual(DestinationHost.normalize("[2001:db8::1]"), "[2001:db8::1]")
        XCTAssertNil(DestinationHost.normalize(""))
        XCTAssertNil(DestinationHost.normalize("a b"))
        XCTAssertNil(DestinationHost.normalize("evil.com/../x"))
        XCTAssertNil(DestinationHost.normalize(String(repeating: "a", count: 300)))
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
