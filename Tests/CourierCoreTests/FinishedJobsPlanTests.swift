import CourierCore
import CourierModel
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0016 dropped `jobs_finished_idx`: the statements that read finished jobs by age
/// (the purge and the last hour of `courier stats`) find them in `jobs_retention_idx`, one
/// range per state and queue. Beside tens of thousands of old finished jobs they must read the
/// rows they report, never the table.
final class FinishedJobsPlanTests: OwnDatabaseTestCase {
    override var databaseLabel: String { "finishedplan" }

    /// Queue `a`: 10,000 jobs succeeded two days ago, 5 in the last hour, 2,000 dead three days
    /// ago and 3 in the last hour. Queue `b`: 10,000 succeeded three days ago (the oldest) and
    /// 2 cancelled in the last hour. Queue `c`: 1,000 waiting jobs.
    private func history() throws {
        try connection.simpleQuery(
            """
            INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
            SELECT 'a', 'succeeded', 'https://a.example/' || i, 1, now() - interval '2 days' + i * interval '1 second'
            FROM generate_series(1, 10000) AS i;
            INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
            SELECT 'a', 'succeeded', 'https://a.example/recent', 1, now() - interval '10 minutes' FROM generate_series(1, 5);
            INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
            SELECT 'a', 'dead', 'https://a.example/' || i, 1, now() - interval '3 days' FROM generate_series(1, 2000) AS i;
            INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
            SELECT 'a', 'dead', 'https://a.example/recent', 1, now() - interval '20 minutes' FROM generate_series(1, 3);
            INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
            SELECT 'b', 'succeeded', 'https://b.example/' || i, 1, now() - interval '3 days' + i * interval '1 second'
            FROM generate_series(1, 10000) AS i;
            INSERT INTO courier.jobs (queue, state, url, finished_at)
            SELECT 'b', 'cancelled', 'https://b.example/recent', now() - interval '5 minutes' FROM generate_series(1, 2);
            INSERT INTO courier.jobs (queue, url) SELECT 'c', 'https://c.example/' || i FROM generate_series(1, 1000) AS i;
            ANALYZE courier.jobs;
            """)
    }

    /// No sequential scan of `courier.jobs`, and `jobs_retention_idx` read.
    private func assertReadsTheRetentionIndex(_ plan: [String: Any], _ what: String, line: UInt = #line) {
        let read = scans(plan: plan)
        XCTAssertFalse(read.contains { $0.type == "Seq Scan" && $0.relation == "jobs" }, "\(what): \(read)", line: line)
        XCTAssertTrue(read.contains { $0.relation == "jobs_retention_idx" }, "\(what): \(read)", line: line)
    }

    func testTheLastHourOfStatsReadsOnlyTheLastHour() throws {
        try history()
        var rows: [String: [Int]] = [:]
        for row in try connection.run(AdminStatements.statsLastHour).rows {
            rows[try row.decode(0)] = [try row.decode(1), try row.decode(2)]
        }
        // Queue b finished only cancelled jobs in the hour: listed, with nothing succeeded or dead.
        XCTAssertEqual(rows, ["a": [5, 3], "b": [0, 0]])
        let plan = try explainRolledBack(AdminStatements.statsLastHour.sql, arguments: "", name: "last_hour")
        assertReadsTheRetentionIndex(plan, "stats last hour")
        XCTAssertLessThanOrEqual(mostRows(plan: plan), 20, "the last hour handled \(mostRows(plan: plan)) rows")
    }

    func testThePurgeTakesTheOldestOfEveryQueueByTheRetentionIndex() throws {
        try history()
        let store = AdminStore(connection: connection)
        let dayAgo = Date().addingTimeInterval(-86_400)
        XCTAssertEqual(try store.countPurgeable(state: .succeeded, olderThan: dayAgo, queue: nil), 20_000)
        XCTAssertEqual(try store.countPurgeable(state: .succeeded, olderThan: dayAgo, queue: "a"), 10_000)
        XCTAssertEqual(try store.countPurgeable(state: .dead, olderThan: dayAgo, queue: nil), 2_000)
        XCTAssertEqual(try store.countPurgeable(state: .cancelled, olderThan: dayAgo, queue: nil), 0)
        let count = try explainRolledBack(
            AdminStatements.countPurgeable.sql, arguments: "'succeeded', now() - interval '1 day', NULL", name: "count")
        assertReadsTheRetentionIndex(count, "count")

        // One batch of 10 over every queue: the 10 oldest, all of queue b, by reading about 10
        // rows of each queue.
        let batch = try explainRolledBack(
            AdminStatements.purgeBatch.sql, arguments: "'succeeded', now() - interval '1 day', NULL, 10", name: "batch")
        assertReadsTheRetentionIndex(batch, "purge batch")
        XCTAssertLessThanOrEqual(mostRows(plan: batch), 40, "a batch of 10 handled \(mostRows(plan: batch)) rows")
        let oldest: [Int64] = try connection.query(
            "SELECT id FROM courier.jobs WHERE state = 'succeeded' ORDER BY finished_at LIMIT 10"
        ).rows.map { try $0.decode(0) }
        _ = try connection.run(
            AdminStatements.purgeBatch, .init(state: .succeeded, olderThan: dayAgo, queue: nil, limit: 10))
        let left: Int = try connection.query(
            "SELECT count(*) FROM courier.jobs WHERE id = ANY ($1::bigint[])", [PostgresArray(oldest)]
        )[0].decode(0)
        XCTAssertEqual(left, 0, "the ten oldest were deleted")
        XCTAssertEqual(try store.countPurgeable(state: .succeeded, olderThan: dayAgo, queue: nil), 19_990)
        XCTAssertEqual(try store.countPurgeable(state: .succeeded, olderThan: dayAgo, queue: "b"), 9_990)
    }
}
