import Foundation
import CourierModel
import XCTest

/// The one backoff type: exponential and stepped delays, jitter bounds, caps.
final class BackoffTests: XCTestCase {
    func testExponentialDoublesUpToItsCap() {
        let backoff = Backoff.exponential(initial: .milliseconds(100), maximum: .seconds(5))
        XCTAssertEqual(
            (1...8).map { backoff.baseDelay(afterFailure: $0) },
            [100, 200, 400, 800, 1600, 3200, 5000, 5000].map { Duration.milliseconds($0) })
        XCTAssertEqual(backoff.baseDelay(afterFailure: 10_000), .seconds(5), "huge exponents stay at the cap")
        XCTAssertEqual(backoff.baseDelay(afterFailure: 0), .milliseconds(100))
    }

    func testStepsRepeatTheirLastEntryAndEmptyWaitsNothing() {
        let backoff = Backoff.steps([.seconds(5), .seconds(300), .seconds(1800)])
        XCTAssertEqual(
            (1...5).map { backoff.baseDelay(afterFailure: $0) }, [5, 300, 1800, 1800, 1800].map { Duration.seconds($0) })
        XCTAssertEqual(Backoff.steps([]).baseDelay(afterFailure: 3), .zero)
    }

    func testJitterAtAGivenRandomValue() {
        func seconds(_ delay: Duration) -> Double { delay / .seconds(1) }
        let proportional = Backoff.steps([.seconds(300)], jitter: .proportional(0.2))
        XCTAssertEqual(seconds(proportional.delay(afterFailure: 1, random: 0)), 240, accuracy: 1e-9)
        XCTAssertEqual(seconds(proportional.delay(afterFailure: 1, random: 0.5)), 300, accuracy: 1e-9)
        XCTAssertEqual(seconds(proportional.delay(afterFailure: 1, random: 1)), 360, accuracy: 1e-9)
        XCTAssertEqual(seconds(proportional.delay(afterFailure: 1, random: 7)), 360, accuracy: 1e-9, "random is clamped")
        XCTAssertEqual(
            seconds(Backoff.steps([.seconds(10)], jitter: .full).delay(afterFailure: 1, random: 0.25)), 2.5,
            accuracy: 1e-9)
        // The exponential cap also holds after jitter.
        let capped = Backoff.exponential(initial: .seconds(4), maximum: .seconds(5), jitter: .proportional(0.5))
        XCTAssertEqual(capped.delay(afterFailure: 1, random: 1), .seconds(5))
    }

    func testDrawnJitterStaysInBoundsAndIsReproducibleWithASeed() {
        let backoff = Backoff.exponential(initial: .seconds(1), maximum: .seconds(60), jitter: .proportional(0.2))
        var a = SplitMix64(seed: 9), b = SplitMix64(seed: 9)
        for n in 1...6 {
            let delay = backoff.delay(afterFailure: n, using: &a)
            XCTAssertEqual(delay, backoff.delay(afterFailure: n, using: &b))
            let nominal = backoff.baseDelay(afterFailure: n)
            XCTAssertGreaterThanOrEqual(delay, nominal * 0.8)
            XCTAssertLessThanOrEqual(delay, nominal * 1.2)
        }
    }
}
