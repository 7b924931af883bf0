import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0006 applied to a database of the schema before it, holding jobs of every state
/// with attempt rows and queue settings: every row is kept unchanged, and the new counts start
/// equal to an exact count.
final class RetentionMigrationTests: XCTestCase {
    func testMigrationKeepsEveryRowAndCountsWhatIsThere() throws {
        let database = try DatabaseBeforeMigration("0006", label: "toretention")
        defer { database.drop() }
        let connection = database.connection

        try connection.simpleQuery(
            """
            INSERT INTO courier.queues (name, paused, max_attempts, retry_schedule) VALUES ('billing', true, 5, '{1 minute}');
            INSERT INTO courier.jobs (queue, state, url, attempt, max_attempts, run_at, finished_at, locked_by, locked_until)
            SELECT q, s::courier.job_state, 'https://a.example/' || i,
                   CASE WHEN s = 'pending' THEN 0 ELSE 1 END, 5, now() - i * interval '1 hour',
                   CASE WHEN s IN ('succeeded', 'dead', 'cancelled') THEN now() - i * interval '1 day' END,
                   CASE WHEN s = 'running' THEN 'w' END,
                   CASE WHEN s = 'running' THEN now() + interval '1 minute' END
            FROM unnest(ARRAY['billing', 'default']) AS q,
                 unnest(ARRAY['pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled']) AS s,
                 generate_series(1, 40) AS i;
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, worker)
            SELECT id, 1, now(), now(), 3, 200, 'w' FROM courier.jobs WHERE state <> 'pending';
            """)
        let fingerprint = """
            SELECT count(*), md5(string_agg(j::text, '|' ORDER BY j.id)) FROM courier.jobs j
            """
        let attemptsFingerprint = """
            SELECT count(*), md5(string_agg(a::text, '|' ORDER BY a.id)) FROM courier.attempts a
            """
        let jobsBefore = try connection.query(fingerprint)[0]
        let attemptsBefore = try connection.query(attemptsFingerprint)[0]
        let queuesBefore: String = try connection.query(
            "SELECT string_agg(name || paused::text || max_attempts::text || retry_schedule::text, ',') FROM courier.queues")[0].decode(0)

        let through0006 = EmbeddedMigrations.all.filter { $0.fileName < "0007" }
        let report = try Migrator(migrations: through0006).migrate(connection)
        XCTAssertEqual(report.applied, ["0006_retention.sql"])

        let jobsAfter = try connection.query(fingerprint)[0]
        XCTAssertEqual(try jobsAfter.decode(0, as: Int.self), 480)
        XCTAssertEqual(try jobsAfter.decode(1, as: String.self), try jobsBefore.decode(1, as: String.self))
        let attemptsAfter = try connection.query(attemptsFingerprint)[0]
        XCTAssertEqual(try attemptsAfter.decode(0, as: Int.self), 400)
        XCTAssertEqual(try attemptsAfter.decode(1, as: String.self), try attemptsBefore.decode(1, as: String.self))
        XCTAssertEqual(
            try connection.query(
                "SELECT string_agg(name || paused::text || max_attempts::text || retry_schedule::text, ',') FROM courier.queues"
            )[0].decode(0, as: String.self), queuesBefore)
        XCTAssertEqual(
            try connection.query(
                "SELECT count(*) FROM courier.queues WHERE keep_succeeded IS NULL AND keep_cancelled IS NULL AND keep_dead IS NULL"
            )[0].decode(0, as: Int.self), 1)

        // The counts start exact: 12 (queue, state) pairs of 40 jobs each.
        let mismatches: Int = try connection.query(
            """
            SELECT count(*) FROM (SELECT queue, state, count(*) AS jobs FROM courier.jobs GROUP BY queue, state) e
            FULL JOIN courier.queue_stats s USING (queue, state)
            WHERE e.jobs IS DISTINCT FROM s.jobs
            """)[0].decode(0)
        XCTAssertEqual(mismatches, 0)
        XCTAssertEqual(try connection.query("SELECT count(*) FROM courier.queue_stats")[0].decode(0, as: Int.self), 12)
        // Every constraint and index of the new file is valid.
        XCTAssertEqual(
            try connection.query(
                """
                SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE c.relname IN ('jobs_retention_idx', 'jobs_queue_due_idx') AND i.indisvalid
                """)[0].decode(0, as: Int.self), 2)
    }
}
