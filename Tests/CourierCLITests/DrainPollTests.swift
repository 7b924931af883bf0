import XCTest

import CourierBench

final class DrainPollTests: XCTestCase {
    func testAQuarterOfTheTimeLeftAtTheRateSoFar() {
        // 10,000 of 50,000 finished in 2 s: 40,000 left need 8 s at that rate; a quarter of that
        // is above the longest wait.
        XCTAssertEqual(DrainPoll.delay(unfinished: 40_000, total: 50_000, elapsed: 2), DrainPoll.longest)
        // 49,900 finished in 10 s: 100 left need 20 ms, a quarter of which is below the
        // shortest wait.
        XCTAssertEqual(DrainPoll.delay(unfinished: 100, total: 50_000, elapsed: 10), DrainPoll.shortest)
        // 49,000 finished in 10 s: 1,000 left need about 204 ms; a quarter is about 51 ms.
        XCTAssertEqual(DrainPoll.delay(unfinished: 1_000, total: 50_000, elapsed: 10), 1_000 * 10 / 49_000.0 / 4, accuracy: 1e-9)
    }

    func testTheEndIsNeverAskedForLessOftenThanTheShortestWaitNearIt() {
        for left in [1, 2, 5, 10, 50] {
            XCTAssertEqual(DrainPoll.delay(unfinished: left, total: 50_000, elapsed: 5), DrainPoll.shortest, "\(left) left")
        }
    }

    func testNothingFinishedYetOrNothingToGoAsksSoon() {
        XCTAssertEqual(DrainPoll.delay(unfinished: 50_000, total: 50_000, elapsed: 0.5), DrainPoll.shortest)
        XCTAssertEqual(DrainPoll.delay(unfinished: 0, total: 50_000, elapsed: 5), DrainPoll.shortest)
        XCTAssertEqual(DrainPoll.delay(unfinished: 10, total: 20, elapsed: 0), DrainPoll.shortest)
        // More unfinished than expected (jobs of the queue the drain did not count) is not a
        // rate: the shortest wait.
        XCTAssertEqual(DrainPoll.delay(unfinished: 30, total: 20, elapsed: 3), DrainPoll.shortest)
    }

    func testTheWaitsStayWithinTheirBounds() {
        for unfinished in stride(from: 1, through: 50_000, by: 997) {
            for elapsed in [0.01, 0.1, 1, 10, 100] {
                let wait = DrainPoll.delay(unfinished: unfinished, total: 50_000, elapsed: elapsed)
                XCTAssertGreaterThanOrEqual(wait, DrainPoll.shortest)
                XCTAssertLessThanOrEqual(wait, DrainPoll.longest)
            }
        }
    }
}
