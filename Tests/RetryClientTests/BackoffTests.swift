import Foundation
import RetryClient
import XCTest

/// The one backoff type: exponential and stepped delays, jitter bounds, caps.
final class BackoffTests: XCTestCase {
    func testExponentialDoublesUpToItsCap() {
        let backoff = Backoff.exponential(initial: .milliseconds(100), maximum: .seconds(5))
        XCTAssertEqual((1...8).map { backoff.baseSeconds(afterFailure: $0) }, [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5])
        XCTAssertEqual(backoff.baseSeconds(afterFailure: 10_000), 5, "huge exponents stay at the cap")
        XCTAssertEqual(backoff.baseSeconds(afterFailure: 0), 0.1)
    }

    func testStepsRepeatTheirLastEntryAndEmptyWaitsNothing() {
        let backoff = Backoff.steps([5, 300, 1800])
        XCTAssertEqual((1...5).map { backoff.baseSeconds(afterFailure: $0) }, [5, 300, 1800, 1800, 1800])
        XCTAssertEqual(Backoff.steps([]).baseSeconds(afterFailure: 3), 0)
    }

    func testJitterAtAGivenRandomValue() {
        let proportional = Backoff.steps([300], jitter: .proportional(0.2))
        XCTAssertEqual(proportional.seconds(afterFailure: 1, random: 0), 240, accuracy: 1e-9)
        XCTAssertEqual(proportional.seconds(afterFailure: 1, random: 0.5), 300, accuracy: 1e-9)
        XCTAssertEqual(proportional.seconds(afterFailure: 1, random: 1), 360, accuracy: 1e-9)
        XCTAssertEqual(proportional.seconds(afterFailure: 1, random: 7), 360, accuracy: 1e-9, "random is clamped")
        XCTAssertEqual(Backoff.steps([10], jitter: .full).seconds(afterFailure: 1, random: 0.25), 2.5, accuracy: 1e-9)
        // The exponential cap also holds after jitter.
        let capped = Backoff.exponential(initial: .seconds(4), maximum: .seconds(5), jitter: .proportional(0.5))
        XCTAssertEqual(capped.seconds(afterFailure: 1, random: 1), 5)
    }

    func testDrawnJitterStaysInBoundsAndIsReproducibleWithASeed() {
        let backoff = Backoff.exponential(initial: .seconds(1), maximum: .seconds(60), jitter: .proportional(0.2))
        var a = SplitMix64(seed: 9), b = SplitMix64(seed: 9)
        for n in 1...6 {
            let delay = backoff.delay(afterFailure: n, using: &a)
            XCTAssertEqual(delay, backoff.delay(afterFailure: n, using: &b))
            let nominal = backoff.baseSeconds(afterFailure: n)
            XCTAssertGreaterThanOrEqual(delay, .seconds(nominal * 0.8))
            XCTAssertLessThanOrEqual(delay, .seconds(nominal * 1.2))
        }
    }

    func testTheTiersUseIt() {
        // The retry client's policy and the durable schedule are views of a Backoff.
        XCTAssertEqual(
            RetryPolicy(exponentialBackoffScale: .milliseconds(500), maximumBackoff: .seconds(60), jitter: .none).backoff,
            .exponential(initial: .milliseconds(500), base: 2, maximum: .seconds(60)))
    }
}
