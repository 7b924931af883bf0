import Postgres
import XCTest

@testable import CourierWorker

/// The claim loops' connections: the worker's settings, planned once per statement.
final class LoopConnectionTests: XCTestCase {
    func testLoopsPlanTheirStatementsOnceAndKeepTheWorkersOtherSettings() {
        var expected = PostgresConnection.Settings.worker
        XCTAssertFalse(expected.genericPlans)
        let loop = WorkerPool.loopSettings(.worker)
        XCTAssertTrue(loop.genericPlans)
        expected.genericPlans = true
        XCTAssertEqual(loop, expected, "only the plan cache mode changes")
        XCTAssertTrue(WorkerPool.loopSettings(.default).genericPlans)
    }
}
