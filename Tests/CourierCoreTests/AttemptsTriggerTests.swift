import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0015: attempts are deleted with their jobs by a statement trigger instead of a
/// foreign key, so writing an outcome no longer locks its job a second time.
final class AttemptsTriggerTests: OwnDatabaseTestCase {
    override var databaseLabel: String { "attempts" }

    private func deliver(_ count: Int, queue: String) throws -> [Int64] {
        let ids = try (0..<count).map { i in
            try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2)", ["https://a.example/\(i)", queue]
            )[0].decode(0, as: Int64.self)
        }
        let store = JobStore(connection: connection, workerID: "w1")
        let jobs = try store.claim(queues: [queue], limit: count, lease: .seconds(60))
        XCTAssertEqual(jobs.count, count)
        try store.record(Array(jobs.prefix(1)), .response(status: 503))
        try store.record(Array(jobs.dropFirst()), .delivered())
        return ids
    }

    private func attempts(_ ids: [Int64]) throws -> Int {
        try connection.query(
            "SELECT count(*) FROM courier.attempts WHERE job_id = ANY ($1)", [PostgresArray(ids)])[0].decode(0)
    }

    func testNoForeignKeyLocksTheJobAndDeletingJobsDeletesTheirAttempts() throws {
        XCTAssertEqual(
            try connection.query(
                "SELECT count(*) FROM pg_constraint WHERE conrelid = 'courier.attempts'::regclass AND contype = 'f'"
            )[0].decode(0, as: Int.self), 0, "an attempt row's insert checks no key")
        let kept = try deliver(3, queue: "kept")
        let gone = try deliver(4, queue: "gone")
        XCTAssertEqual(try attempts(gone), 4)
        // An operator's DELETE, of several jobs in one statement.
        try connection.query("DELETE FROM courier.jobs WHERE queue = 'gone'")
        XCTAssertEqual(try attempts(gone), 0)
        XCTAssertEqual(try attempts(kept), 3, "other jobs keep their history")
        // Retention deletes through the same trigger, as the worker's role may not delete attempts itself.
        try connection.query(
            "UPDATE courier.jobs SET finished_at = now() - interval '30 days' WHERE queue = 'kept' AND state = 'succeeded'")
        let store = JobStore(connection: connection, workerID: "w1")
        XCTAssertNotNil(try store.maintain(keepingSucceeded: .seconds(86_400)))
        XCTAssertEqual(try attempts(kept), 1, "the retrying job and its attempt stay")
        try connection.query("TRUNCATE courier.jobs")
        XCTAssertEqual(try connection.query("SELECT count(*) FROM courier.attempts")[0].decode(0, as: Int.self), 0)
    }
}
