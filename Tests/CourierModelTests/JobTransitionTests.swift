import Foundation
import CourierModel
import XCTest

final class JobTransitionTests: XCTestCase {
    private let schedule = RetrySchedule(delays: [.seconds(5), .seconds(300), .seconds(1800)], jitter: 0.2)

    func testStandardWebhooksScheduleIsTenAttemptsOverAboutThreeDays() {
        let s = RetrySchedule.standardWebhooks
        XCTAssertEqual(s.delays.count + 1, RetrySchedule.defaultMaxAttempts)
        let total = (1..<RetrySchedule.defaultMaxAttempts).map { s.baseDelay(afterAttempt: $0) }.reduce(.zero, +)
        XCTAssertEqual(total / .seconds(86_400), 3.1, accuracy: 0.1)
        XCTAssertEqual(s.jitter, 0.2)
    }

    func testLastDelayRepeatsWhenAttemptsOutnumberTheSchedule() {
        XCTAssertEqual(schedule.baseDelay(afterAttempt: 1), .seconds(5))
        XCTAssertEqual(schedule.baseDelay(afterAttempt: 3), .seconds(1800))
        XCTAssertEqual(schedule.baseDelay(afterAttempt: 9), .seconds(1800))
        XCTAssertEqual(RetrySchedule(delays: []).baseDelay(afterAttempt: 1), .zero)
    }

    func testJitterStaysWithinTwentyPercent() {
        XCTAssertEqual(schedule.delay(afterAttempt: 2, random: 0) / .seconds(1), 240, accuracy: 1e-9)
        XCTAssertEqual(schedule.delay(afterAttempt: 2, random: 0.5) / .seconds(1), 300, accuracy: 1e-9)
        XCTAssertEqual(schedule.delay(afterAttempt: 2, random: 1) / .seconds(1), 360, accuracy: 1e-9)
        for _ in 0..<1000 {
            let d = schedule.delay(afterAttempt: 1, random: Double.random(in: 0..<1))
            XCTAssertTrue((Duration.seconds(4)...Duration.seconds(6)).contains(d))
        }
    }

    func testSuccessSucceedsOnAnyAttempt() {
        XCTAssertEqual(
            JobTransition.decide(.delivered(status: 204), attempt: 10, maxAttempts: 10, schedule: schedule, random: 0.5),
            .succeed)
    }

    func testRetryableFailureWithAttemptsLeftRetriesOnTheSchedule() {
        let result = Delivery.response(status: 503, error: "HTTP 503")
        XCTAssertEqual(
            JobTransition.decide(result, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: .seconds(5)))
    }

    func testRetryAfterMayLengthenButNeverShortenTheWait() {
        // Statuses other than 429/503 (and 429/503 past the postponement cap) spend the attempt.
        let longer = Delivery.response(status: 500, error: "HTTP 500", retryAfter: .seconds(120))
        XCTAssertEqual(
            JobTransition.decide(longer, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: .seconds(120)))
        let shorter = Delivery.response(status: 429, error: "HTTP 429", retryAfter: .seconds(1))
        XCTAssertEqual(
            JobTransition.decide(
                shorter, attempt: 2, maxAttempts: 3, schedule: schedule,
                postponements: Defaults.maximumPostponements, random: 0.5),
            .retry(delay: .seconds(300)))
        let huge = Delivery.response(status: 502, error: "HTTP 502", retryAfter: .seconds(10 * 86_400))
        XCTAssertEqual(
            JobTransition.decide(huge, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: Defaults.maximumRetryAfter))
    }

    func testTooManyRequestsOrUnavailableWithRetryAfterPostponesWithoutSpendingTheAttempt() {
        for status in [429, 503] {
            let result = Delivery.response(status: status, error: "HTTP \(status)", retryAfter: .seconds(30))
            let transition = JobTransition.decide(
                result, attempt: 3, maxAttempts: 3, schedule: schedule, postponements: 4, random: 0.5)
            XCTAssertEqual(transition, .postpone(delay: .seconds(30)))
            XCTAssertFalse(transition.spendsAttempt)
            XCTAssertEqual(transition.state, .retrying)
        }
        // Without Retry-After it is an ordinary failure.
        let bare = Delivery.response(status: 429, error: "HTTP 429")
        XCTAssertEqual(
            JobTransition.decide(bare, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .retry(delay: .seconds(5)))
        // Past the cap the answer spends an attempt, and on the last attempt the job is dead.
        let capped = Delivery.response(status: 503, error: "HTTP 503", retryAfter: .seconds(30))
        XCTAssertEqual(
            JobTransition.decide(
                capped, attempt: 3, maxAttempts: 3, schedule: schedule,
                postponements: Defaults.maximumPostponements, random: 0.5),
            .dead(reason: "attempts exhausted (3 of 3): HTTP 503"))
        // The server's delay is capped like any Retry-After.
        let far = Delivery.response(status: 429, error: "HTTP 429", retryAfter: .seconds(1_000_000_000))
        XCTAssertEqual(
            JobTransition.decide(far, attempt: 1, maxAttempts: 3, schedule: schedule, random: 0.5),
            .postpone(delay: Defaults.maximumRetryAfter))
    }

    func testGoneParksTheJobWithoutSpendingTheAttempt() {
        let gone = Delivery.response(status: 410, error: "HTTP 410")
        let transition = JobTransition.decide(gone, attempt: 3, maxAttempts: 3, schedule: schedule, random: 0.5)
        guard case .park = transition else { return XCTFail("410 should park, got \(transition)") }
        XCTAssertFalse(transition.spendsAttempt)
        // A shared host's 410 ends only that job.
        XCTAssertEqual(
            JobTransition.decide(
                gone, attempt: 1, maxAttempts: 3, schedule: schedule, parkOnGone: false, random: 0.5),
            .dead(reason: "HTTP 410"))
        XCTAssertEqual(
            JobTransition.decide(
                .response(status: 404, error: "HTTP 404"), attempt: 1, maxAttempts: 3, schedule: schedule,
                random: 0.5),
            .dead(reason: "HTTP 404"))
    }

    func testTheDestinationSignalTravelsWithTheVerdict() {
        XCTAssertEqual(Delivery.delivered(status: 204).verdict.destination, .answered)
        XCTAssertEqual(Delivery.response(status: 400, error: "HTTP 400").verdict.destination, .answered)
        XCTAssertEqual(Delivery.response(status: 410, error: "HTTP 410").verdict.destination, .gone)
        XCTAssertEqual(Delivery.failure(.refusedTarget, error: "refused: private address").verdict.destination, .none)
        // The endpoint's own failures count against the endpoint; the host hears an answer.
        XCTAssertEqual(Delivery.response(status: 500, error: "HTTP 500").verdict.destination, .endpointFailed)
        XCTAssertEqual(
            Delivery.response(status: 503, error: "HTTP 503", retryAfter: .seconds(5)).verdict.destination, .endpointFailed)
        XCTAssertEqual(Delivery.response(status: 408, error: "HTTP 408").verdict.destination, .endpointFailed)
        XCTAssertEqual(
            Delivery.failure(.transport(.readTimeout), error: "no answer in time").verdict.destination, .endpointFailed)
        // What keeps the host from answering at all counts against the host.
        XCTAssertEqual(
            Delivery.failure(.transport(.connectRefused), error: "connection refused").verdict.destination, .failed)
        XCTAssertEqual(
            Delivery.failure(.transport(.connectTimeout), error: "connect timed out").verdict.destination, .failed)
        XCTAssertEqual(
            Delivery.failure(.transport(.connectionReset), error: "connection reset").verdict.destination, .failed)
        XCTAssertEqual(Delivery.response(status: 429, error: "HTTP 429", retryAfter: .seconds(5)).verdict.destination, .none)
        XCTAssertEqual(Delivery.response(status: 425, error: "HTTP 425").verdict.destination, .answered)
        XCTAssertEqual(Delivery.failure(.interrupted, error: "interrupted").verdict.destination, .none)
        XCTAssertEqual(Delivery.failure(.tokenUnavailable, error: "token endpoint down").verdict.destination, .none)
    }

    func testASuccessHasNoErrorAndAFailureNamesItsStatus() {
        XCTAssertNil(Delivery.response(status: 200, error: "HTTP 200 OK").error)
        XCTAssertEqual(Delivery.response(status: 502).error, "HTTP 502")
        let record = AttemptRecord(
            jobID: 1, attempt: 1, transition: .dead(reason: "HTTP 410"), delivery: .response(status: 410),
            startedAt: Date(), finishedAt: Date())
        XCTAssertEqual(record.signal, .gone, "the record's signal is the verdict's")
    }

    func testExhaustedAttemptsGoDeadWithTheLastError() {
        let result = Delivery.response(status: 503, error: "HTTP 503 Service Unavailable")
        let transition = JobTransition.decide(result, attempt: 3, maxAttempts: 3, schedule: schedule, random: 0.5)
        XCTAssertEqual(transition.state, .dead)
        guard case .dead(let reason) = transition else { return XCTFail() }
        XCTAssertTrue(reason.contains("attempts exhausted (3 of 3)"))
        XCTAssertTrue(reason.contains("HTTP 503"))
    }

    func testPermanentFailureGoesDeadAtOnce() {
        let result = Delivery.response(status: 400, error: "HTTP 400 Bad Request")
        XCTAssertEqual(
            JobTransition.decide(result, attempt: 1, maxAttempts: 10, schedule: schedule, random: 0.5),
            .dead(reason: "HTTP 400 Bad Request"))
    }

    func testStatesAreAClosedSetMatchingTheDatabaseEnum() {
        XCTAssertEqual(JobState.allCases.map(\.rawValue), ["pending", "running", "retrying", "succeeded", "dead", "cancelled"])
        XCTAssertEqual(JobState.allCases.filter(\.isFinal), [.succeeded, .dead, .cancelled])
        XCTAssertEqual(JobState.allCases.filter(\.isClaimable), [.pending, .retrying])
    }
}
