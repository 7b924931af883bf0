import CourierCore
import CourierSink
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Every request that reaches the receiver leaves a `courier.attempts` row, the ones the worker
/// repeats in process included (marked `in_process`), so the history tells what the receiver saw.
final class AttemptHistoryTests: WorkerTestCase {
    override func setUp() async throws {
        url = try TestDatabase.shared(label: "attempthistory")
        probe = try JobsProbe(url: url)
        queue = "h\(UInt32.random(in: 0...UInt32.max))"
        try probe.forgetDestinations()
    }

    func testAReceiverThatResetsEveryConnectionSeesAsManyRequestsAsThereAreAttemptRows() async throws {
        let log = self.log
        let sink = try await HTTPSink.start { request in
            log.record(request, key: request.header("courier-job-id") ?? "?")
            return .close
        }
        sinks.append(sink)
        let ids = try (0..<3).map { _ in
            try probe.enqueue(url: sink.baseURL + "/reset", queue: queue, maxAttempts: 3, retrySeconds: [0.1])
        }
        _ = try startWorkerProcess()
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(60)))
        for id in ids {
            let job = try probe.job(id)
            XCTAssertEqual(job.state, "dead")
            XCTAssertEqual(job.attempt, 3)
            let requests = log.counts[String(id)] ?? 0
            let rows = try probe.connection.query(
                """
                SELECT count(*), count(*) FILTER (WHERE in_process), count(DISTINCT attempt),
                       count(*) FILTER (WHERE NOT in_process AND error LIKE '%connection reset%')
                FROM courier.attempts WHERE job_id = $1
                """, [id])[0]
            let total: Int = try rows.decode(0), inProcess: Int = try rows.decode(1)
            XCTAssertGreaterThan(requests, 3, "the worker did not repeat requests in process; the test proves nothing")
            XCTAssertEqual(total, requests, "the receiver saw \(requests) requests, the history has \(total) rows")
            XCTAssertEqual(inProcess, requests - 3, "all but one row per attempt are in-process repeats")
            XCTAssertEqual(try rows.decode(2, as: Int.self), 3)
            XCTAssertEqual(try rows.decode(3, as: Int.self), 3, "each attempt's deciding row")
        }
        // `courier jobs show` lists them, in the order they were sent.
        let shown = try CourierRunner.run(["jobs", "show", String(ids[0]), "--json"], databaseURL: url)
        XCTAssertEqual(shown.status, 0, shown.stderr)
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
        let attempts = try XCTUnwrap(json["attempts"] as? [[String: Any]])
        XCTAssertEqual(attempts.count, log.counts[String(ids[0])])
        XCTAssertEqual(attempts.compactMap { ($0["in_process"] as? NSNumber)?.boolValue }.filter { $0 }.count, attempts.count - 3)
    }
}
