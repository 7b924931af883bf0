import CourierCore
import Foundation
import XCTest

@testable import CourierWorker

/// How a written batch of outcomes is counted: the labels of each outcome, runs of equal labels
/// counted together, and every outcome in the tally.
final class DeliveryMetricsTests: XCTestCase {
    private func record(_ id: Int64, _ transition: JobTransition, _ delivery: Delivery) -> AttemptRecord {
        AttemptRecord(
            jobID: id, attempt: 1, transition: transition, delivery: delivery,
            startedAt: Date(timeIntervalSince1970: 0), finishedAt: Date(timeIntervalSince1970: 1))
    }

    func testStatusClassesNameTheHundredsAndNoneOutsideThem() {
        let cases: [(Int?, String)] = [
            (nil, "none"), (99, "none"), (100, "1xx"), (199, "1xx"), (200, "2xx"), (204, "2xx"), (301, "3xx"),
            (399, "3xx"), (404, "4xx"), (429, "4xx"), (500, "5xx"), (599, "5xx"), (600, "none"), (-200, "none"),
        ]
        for (status, expected) in cases {
            XCTAssertEqual(WorkerMetrics.statusClass(status), expected, "\(String(describing: status))")
        }
    }

    func testABatchIsCountedInRunsOfTheSameLabels() {
        let records = [
            record(1, .succeed, .delivered(status: 200)),
            record(2, .succeed, .delivered(status: 204)),
            record(3, .dead(reason: "HTTP 404"), .response(status: 404)),
            record(4, .succeed, .delivered(status: 200)),
            record(5, .succeed, .delivered(status: 201)),
            record(6, .retry(delay: .seconds(5)), .failure(.transport(.connectRefused), error: "refused")),
        ]
        let queues = ["a", "a", "a", "a", "b", "b"]
        let runs = WorkerMetrics.deliveryRuns(records, queues: queues).map {
            "\($0.key.queue)/\($0.key.outcome)/\($0.key.statusClass)=\($0.count)"
        }
        XCTAssertEqual(runs, ["a/succeeded/2xx=2", "a/dead/4xx=1", "a/succeeded/2xx=1", "b/succeeded/2xx=1", "b/retry/none=1"])

        let metrics = WorkerMetrics()
        metrics.record(records, queues: queues)
        metrics.record([], queues: [])
        XCTAssertEqual(metrics.outcomesWritten, 6)
        var expected = OutcomeTally()
        expected.succeeded = 4
        expected.dead = 1
        expected.retried = 1
        XCTAssertEqual(metrics.outcomes, expected)
    }
}
