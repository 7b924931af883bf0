import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0021: a job's queue name, max_attempts and retry schedule are checked by triggers
/// when they are written (an INSERT, or an UPDATE that sets them) instead of by CHECK
/// constraints at every update of the row. The rules, the SQLSTATE and the constraint names
/// must be those of the constraints they replace, for rows written by hand too.
final class JobSettingsCheckTests: OwnDatabaseTestCase {
    override var databaseLabel: String { "settingscheck" }

    private func jobCount() throws -> Int {
        try connection.query("SELECT count(*)::int FROM courier.jobs")[0].decode(0)
    }

    /// Runs `sql` and returns the SQLSTATE, constraint name and message it failed with.
    private func refusal(_ sql: String) throws -> String {
        let block = """
            DO $block$
            DECLARE state text; name text; text text;
            BEGIN
                \(sql);
                RAISE EXCEPTION 'accepted';
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, name = CONSTRAINT_NAME, text = MESSAGE_TEXT;
                RAISE EXCEPTION '% % %', state, coalesce(nullif(name, ''), '-'), text;
            END
            $block$
            """
        do {
            try connection.simpleQuery(block)
        } catch let error as PostgresError {
            return error.message
        }
        return "no error"
    }

    func testTheThreeRulesAreNoLongerConstraintsOfTheTable() throws {
        let names: [String] = try connection.query(
            "SELECT conname::text FROM pg_constraint WHERE conrelid = 'courier.jobs'::regclass AND contype = 'c' ORDER BY 1"
        ).rows.map { try $0.decode(0) }
        for moved in ["jobs_queue_valid", "jobs_max_attempts_positive", "jobs_retry_schedule_bounded"] {
            XCTAssertFalse(names.contains(moved), "\(names)")
        }
        XCTAssertEqual(names.count, 7, "\(names)")
        let triggers: [String] = try connection.query(
            "SELECT tgname::text FROM pg_trigger WHERE tgrelid = 'courier.jobs'::regclass AND NOT tgisinternal ORDER BY 1"
        ).rows.map { try $0.decode(0) }
        XCTAssertTrue(triggers.contains("jobs_check_settings_inserted"), "\(triggers)")
        XCTAssertTrue(triggers.contains("jobs_check_settings_updated"), "\(triggers)")
        // No BEFORE UPDATE row trigger (tgtype: ROW 1, BEFORE 2, UPDATE 16): with one, even one
        // that never fires for the worker's columns, PostgreSQL locks every updated row again
        // and computes the generated column `host` anew at each claim and outcome.
        let before: [String] = try connection.query(
            """
            SELECT tgname::text FROM pg_trigger
            WHERE tgrelid = 'courier.jobs'::regclass AND NOT tgisinternal AND tgtype & 19 = 19
            """
        ).rows.map { try $0.decode(0) }
        XCTAssertEqual(before, [])
    }

    func testAnInsertWithABadSettingIsRefusedAsTheConstraintRefusedIt() throws {
        let insert = "INSERT INTO courier.jobs (url, queue, max_attempts, retry_schedule) VALUES "
        let cases: [(sql: String, expected: String)] = [
            (insert + "('https://a.example/', 'a b', 10, NULL)",
             "23514 jobs_queue_valid queue must be 1-128 characters of A-Z a-z 0-9 _ . : -, got 'a b'"),
            (insert + "('https://a.example/', '', 10, NULL)", "23514 jobs_queue_valid queue must not be empty"),
            (insert + "('https://a.example/', repeat('q', 129), 10, NULL)", "23514 jobs_queue_valid queue must be"),
            (insert + "('https://a.example/', 'caf\u{E9}', 10, NULL)", "23514 jobs_queue_valid queue must be"),
            // 0 breaks jobs_attempt_within_max first (attempt 0 of 0 while waiting), as before.
            (insert + "('https://a.example/', 'ok', 0, NULL)", "23514 jobs_attempt_within_max"),
            (insert + "('https://a.example/', 'ok', 1001, NULL)",
             "23514 jobs_max_attempts_positive max_attempts must be between 1 and 1000, got 1001"),
            (insert + "('https://a.example/', 'ok', 10, '{1000000 years}')",
             "23514 jobs_retry_schedule_bounded retry_schedule must hold 1 to 100 delays"),
            (insert + "('https://a.example/', 'ok', 10, '{}')", "23514 jobs_retry_schedule_bounded"),
            // With a bad request too, the request is reported (its trigger's name sorts first).
            (insert + "('https://a.example:99999/', 'a/b', 10, NULL)", "22023 - url port must be"),
            // One bad row among many distinct good ones refuses the whole statement.
            ("INSERT INTO courier.jobs (url, queue) SELECT 'https://a.example/', 'q' || g FROM generate_series(1, 500) g "
                + "UNION ALL SELECT 'https://a.example/', 'bad queue'", "23514 jobs_queue_valid"),
        ]
        for (sql, expected) in cases {
            let message = try refusal(sql)
            XCTAssertTrue(message.hasPrefix(expected), "\(sql): \(message)")
        }
        XCTAssertEqual(try jobCount(), 0)
        XCTAssertEqual(
            try refusal(insert + "('https://a.example/', 'Billing.v2:eu-west_1', 1000, '{0 seconds, 30 days}')"),
            "P0001 - accepted")
    }

    func testAnUpdateThatSetsASettingIsCheckedAndOtherUpdatesAreNot() throws {
        let id: Int64 = try connection.query(
            "INSERT INTO courier.jobs (url, queue) VALUES ('https://a.example/', 'ok') RETURNING id")[0].decode(0)
        let cases: [(sql: String, expected: String)] = [
            ("UPDATE courier.jobs SET queue = 'x y' WHERE id = \(id)", "23514 jobs_queue_valid"),
            ("UPDATE courier.jobs SET max_attempts = 1001 WHERE id = \(id)", "23514 jobs_max_attempts_positive"),
            ("UPDATE courier.jobs SET max_attempts = 0 WHERE id = \(id)", "23514 jobs_attempt_within_max"),
            ("UPDATE courier.jobs SET retry_schedule = '{31 days}' WHERE id = \(id)", "23514 jobs_retry_schedule_bounded"),
            ("UPDATE courier.jobs SET queue = 'ok', max_attempts = 5, retry_schedule = '{1 second}' WHERE id = \(id)",
             "P0001 - accepted"),
        ]
        for (sql, expected) in cases {
            let message = try refusal(sql)
            XCTAssertTrue(message.hasPrefix(expected), "\(sql): \(message)")
        }
        // The worker's statements set none of the three: the trigger is not among the ones
        // an update of the state fires.
        let fires: Bool = try connection.query(
            """
            SELECT EXISTS (SELECT 1 FROM pg_trigger t
                           JOIN pg_attribute a ON a.attrelid = t.tgrelid AND a.attnum = ANY (t.tgattr)
                           WHERE t.tgname = 'jobs_check_settings_updated' AND a.attname IN ('state', 'attempt', 'locked_by',
                                 'locked_until', 'run_at', 'finished_at', 'last_status', 'last_error', 'updated_at'))
            """)[0].decode(0)
        XCTAssertFalse(fires)
    }
}
