import CourierTesting
import Foundation
import Postgres
import XCTest

/// A migrated database of its own per test class, and helpers to run `courier` against it.
class CLITestCase: XCTestCase {
    var databaseURL = ""
    var connection: PostgresConnection!

    override func setUpWithError() throws {
        databaseURL = try TestDatabase.create(label: "cli")
        connection = try PostgresConnection(databaseURL)
    }

    override func tearDown() {
        connection?.close()
        if !databaseURL.isEmpty { TestDatabase.drop(databaseURL) }
    }

    func courier(_ arguments: String..., stdin: Data? = nil) throws -> CommandResult {
        try CourierRunner.run(arguments, databaseURL: databaseURL, stdin: stdin)
    }

    func count(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> Int {
        try connection.query(sql, parameters)[0].decode(0)
    }

    var jobCount: Int { get throws { try count("SELECT count(*) FROM courier.jobs") } }

    /// Asserts a failed run: the exit code, exactly one line on stderr containing `fragment`.
    func assertFails(
        _ result: CommandResult, code: Int32, mentioning fragment: String, file: StaticString = #filePath,
            line: UInt = #line
    ) {
        XCTAssertEqual(result.status, code, result.stderr, file: file, line: line)
        XCTAssertEqual(result.stderrLines.count, 1, "expected one line: \(result.stderr)", file: file, line: line)
        XCTAssertTrue(result.stderr.contains(fragment), "\(fragment.debugDescription) not in \(result.stderr)",
            file: file, line: line)
        XCTAssertTrue(result.stderr.hasPrefix("error: "), result.stderr, file: file, line: line)
    }

    /// Drops every CHECK constraint of `tables`, so a test can write rows the API refuses, as a
    /// hand-written INSERT, an old version or a restore could (the database is the test's own).
    func dropCheckConstraints(_ tables: [String] = ["courier.jobs", "courier.attempts", "courier.queues"]) throws {
        for table in tables {
            let names = try connection.query(
                "SELECT conname FROM pg_constraint WHERE contype = 'c' AND conrelid = $1::regclass", [table]
            ).rows.map { try $0.decode(0, as: String.self) }
            for name in names {
                let quoted = try connection.quoteIdentifier(name)
                try connection.simpleQuery("ALTER TABLE \(table) DROP CONSTRAINT \(quoted)")
            }
        }
        // The row checks that are triggers (url, method, headers) are switched off too; the
        // wake-up stays. `setRowTriggers(enabled: true)` switches them back on.
        try setRowTriggers(enabled: false)
    }

    /// Switches the row-check triggers of `courier.jobs` on or off (never the wake-up trigger).
    /// `courier.enqueue` relies on them to check a request, so a test that wrote rows around
    /// the checks turns them back on before it enqueues through the API again.
    func setRowTriggers(enabled: Bool) throws {
        let triggers = try connection.query(
            """
            SELECT tgname FROM pg_trigger
            WHERE tgrelid = 'courier.jobs'::regclass AND NOT tgisinternal AND tgname <> 'jobs_notify_inserted'
            """
        ).rows.map { try $0.decode(0, as: String.self) }
        for name in triggers {
            let quoted = try connection.quoteIdentifier(name)
            try connection.simpleQuery("ALTER TABLE courier.jobs \(enabled ? "ENABLE" : "DISABLE") TRIGGER \(quoted)")
        }
    }

    /// Inserts a job directly in `state` (finished states get finished_at) and returns its id.
    @discardableResult
    func insertJob(state: String = "pending", queue: String = "default", url: String = "http://127.0.0.1:9/x",
                   lastError: String? = nil, finishedAgo: Double = 0) throws -> Int64 {
        try connection.query(
            """
            INSERT INTO courier.jobs (queue, state, url, attempt, finished_at, last_error, locked_by, locked_until)
            VALUES ($1, $2::courier.job_state, $3, CASE WHEN $2 IN ('pending') THEN 0 ELSE 1 END,
                    CASE WHEN $2 IN ('succeeded', 'dead', 'cancelled') THEN now() - $5 * interval '1 second' END, $4,
                    CASE WHEN $2 = 'running' THEN 'w' END,
                        CASE WHEN $2 = 'running' THEN now() + interval '1 minute' END)
            RETURNING id
            """, [queue, state, url, lastError, finishedAgo])[0].decode(0)
    }
}
