import CourierCore
import XCTest

/// How a retention pass spends its budget: whether it goes on after a batch, and when the next
/// pass runs when it is behind or caught up.
final class RetentionBudgetTests: XCTestCase {
    func testBudgetDecisions() {
        let budget = RetentionBudget(batchSize: 100, time: .seconds(1), pauseWhenBehind: .milliseconds(100))
        XCTAssertTrue(budget.continues(afterDeleting: 100, elapsed: .milliseconds(500)))
        XCTAssertFalse(budget.continues(afterDeleting: 99, elapsed: .milliseconds(500)))
        XCTAssertFalse(budget.continues(afterDeleting: 100, elapsed: .seconds(1)))
        XCTAssertFalse(budget.continues(afterDeleting: 0, elapsed: .zero))
        var behind = MaintenanceReport()
        behind.caughtUp = false
        XCTAssertEqual(budget.nextPass(after: behind, interval: .seconds(5)), .milliseconds(100))
        XCTAssertEqual(budget.nextPass(after: behind, interval: .milliseconds(50)), .milliseconds(50))
        XCTAssertEqual(budget.nextPass(after: MaintenanceReport(), interval: .seconds(5)), .seconds(5))
        XCTAssertEqual(budget.nextPass(after: nil, interval: .seconds(5)), .seconds(5))
        XCTAssertEqual(RetentionBudget(batchSize: 0, time: .seconds(-1)).batchSize, 1)
        XCTAssertEqual(RetentionBudget(batchSize: 0, time: .seconds(-1)).time, .zero)
        XCTAssertEqual(RetentionDefaults(succeeded: .seconds(-5)).succeeded, .zero)
    }
}
