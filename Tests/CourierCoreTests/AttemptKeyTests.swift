import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0019: an attempt row takes one index entry fewer. The primary key is
/// (job_id, id) and `attempts_job_idx` is gone, so every reader of attempts, which always names
/// the job, must still reach that job's rows through the key, beside many other jobs' rows.
final class AttemptKeyTests: OwnDatabaseTestCase {
    override var databaseLabel: String { "attemptkey" }

    /// Job `id`'s attempt rows.
    private func attempts(of id: Int64) throws -> Int {
        try connection.query("SELECT count(*)::int FROM courier.attempts WHERE job_id = $1", [id])[0].decode(0)
    }

    /// Sequential scans of `courier.attempts` in the current transaction so far.
    private func attemptSeqScans() throws -> Int {
        try connection.query(
            "SELECT seq_scan::int FROM pg_stat_xact_user_tables WHERE relid = 'courier.attempts'::regclass"
        )[0].decode(0)
    }

    /// A database with history written under 0018: 0019 keeps every attempt row and its id,
    /// and new rows go on numbering after them.
    func testTheMigrationKeepsEveryAttemptAndItsId() throws {
        let database = try DatabaseBeforeMigration("0019", label: "toattemptkey")
        defer { database.drop() }
        let connection = database.connection
        try connection.simpleQuery(
            """
            INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
            SELECT 'history', 'succeeded', 'https://busy.example/' || i, 1, now() FROM generate_series(1, 50) AS i;
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, worker)
            SELECT j.id, n, now(), now(), 1, 200, 'w' FROM courier.jobs j, generate_series(1, 3) AS n;
            """)
        let rowsOf = "SELECT id, job_id, attempt FROM courier.attempts ORDER BY id"
        let before: [[Int64]] = try connection.query(rowsOf).rows.map {
            [try $0.decode(0), try $0.decode(1), Int64(try $0.decode(2, as: Int.self))]
        }
        XCTAssertEqual(before.count, 150)

        let report = try Migrator(migrations: EmbeddedMigrations.all.filter { $0.fileName < "0020" }).migrate(connection)
        XCTAssertEqual(report.applied, ["0019_attempts_keyed_by_job.sql"])
        let after: [[Int64]] = try connection.query(rowsOf).rows.map {
            [try $0.decode(0), try $0.decode(1), Int64(try $0.decode(2, as: Int.self))]
        }
        XCTAssertEqual(after, before)
        let next: Int64 = try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, worker)
            SELECT min(id), 4, now(), now(), 1, 200, 'w' FROM courier.jobs RETURNING id
            """)[0].decode(0)
        XCTAssertGreaterThan(next, before.map { $0[0] }.max() ?? 0)
    }

    func testAttemptsHaveOneKeyByJobThatEveryReaderOfAJobUses() throws {
        let indexes: [String] = try connection.query(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'courier' AND tablename = 'attempts' ORDER BY indexname"
        ).rows.map { try $0.decode(0) }
        XCTAssertEqual(
            indexes,
            [
                "CREATE INDEX attempts_finished_idx ON courier.attempts USING btree (finished_at)",
                "CREATE UNIQUE INDEX attempts_pkey ON courier.attempts USING btree (job_id, id)",
            ], "an attempt row takes two index entries, one of them the key by job")

        // 20,000 attempts of other jobs, analyzed, then one job with a failed and a delivered attempt.
        try connection.simpleQuery(
            """
            INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
            SELECT 'history', 'succeeded', 'https://busy.example/' || i, 1, now() FROM generate_series(1, 2000) AS i;
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, worker)
            SELECT j.id, n, now(), now(), 1, 200, 'w' FROM courier.jobs j, generate_series(1, 10) AS n;
            ANALYZE courier.jobs, courier.attempts;
            """)
        let id: Int64 = try connection.query(
            "SELECT courier.enqueue(url => 'https://a.example/hook', payload => '{}', queue => 'live')")[0].decode(0)
        let store = JobStore(connection: connection, workerID: "w1")
        try store.record(try store.claim(queues: ["live"], limit: 1, lease: .seconds(60)), .response(status: 503))
        try connection.query("UPDATE courier.jobs SET run_at = now() WHERE id = $1", [id])
        let second = try store.claim(queues: ["live"], limit: 1, lease: .seconds(60))
        XCTAssertEqual(second.map(\.id), [id])
        try store.record(second, .delivered())
        XCTAssertEqual(try attempts(of: id), 2)

        // The job's history, as `courier jobs show` and the console read it: its two rows, by the key.
        let history = try explainRolledBack(AdminStatements.jobAttempts.sql, arguments: "\(id)", name: "history")
        let historyScans = scans(plan: history)
        XCTAssertTrue(historyScans.contains { $0.relation == "attempts_pkey" }, "the history read \(historyScans)")
        XCTAssertFalse(historyScans.contains { $0.type == "Seq Scan" }, "the history read \(historyScans)")
        XCTAssertLessThanOrEqual(mostRows(plan: history), 2)
        let rows = try connection.query(AdminStatements.jobAttempts.sql, [id]).rows
        XCTAssertEqual(try rows.map { try $0.decode(0, as: Int.self) }, [1, 2], "in the order they were made")

        // The same outcome written again (its COMMIT's answer was lost): the check for a row
        // already written finds it by the key and adds nothing.
        let repeated = second.map {
            AttemptRecord(
                jobID: $0.id, attempt: $0.attempt, transition: .succeed, delivery: .delivered(),
                startedAt: Date(timeIntervalSince1970: 1_700_000_000), finishedAt: Date(timeIntervalSince1970: 1_700_000_001),
                host: $0.host)
        }
        XCTAssertEqual(try store.recordOutcomes(repeated).changed, [])
        XCTAssertEqual(try attempts(of: id), 3, "a stale outcome of a job that exists is kept once as history")
        XCTAssertEqual(try store.recordOutcomes(repeated).changed, [])
        XCTAssertEqual(try attempts(of: id), 3, "and never twice")

        // Deleting the job deletes its attempts through the key, not by reading every attempt.
        try connection.transaction { connection in
            let before = try self.attemptSeqScans()
            try connection.query("DELETE FROM courier.jobs WHERE id = $1", [id])
            XCTAssertEqual(try self.attemptSeqScans(), before, "deleting a job's attempts scanned the whole table")
        }
        XCTAssertEqual(try attempts(of: id), 0)
        XCTAssertEqual(
            try connection.query("SELECT count(*)::int FROM courier.attempts")[0].decode(0, as: Int.self), 20_000,
            "other jobs keep their history")
    }
}
