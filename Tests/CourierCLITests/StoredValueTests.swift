import CourierTesting
import Foundation
import Postgres
import XCTest

/// Rows written around the API (by hand, by an old version, by a restore) hold values the CLI
/// cannot turn into dates or Swift numbers; every command that shows them prints them as text
/// and exits 0.
final class StoredValueTests: CLITestCase {
    private func insertRaw(state: String, runAt: String, finishedAt: String?, lockedUntil: String? = nil,
                           attempt: Int = 1, schedule: String? = nil) throws -> Int64 {
        try connection.query(
            """
            INSERT INTO courier.jobs (state, url, run_at, finished_at, locked_by, locked_until, attempt, retry_schedule)
            VALUES ($1::courier.job_state, 'https://example.com/odd', $2::timestamptz, $3::timestamptz,
                    CASE WHEN $4::text IS NOT NULL THEN 'w' END, $4::timestamptz, $5, $6::interval[])
            RETURNING id
            """, [state, runAt, finishedAt, lockedUntil, attempt, schedule])[0].decode(0)
    }

    private func assertShows(
        _ arguments: [String], _ fragments: [String], file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let result = try CourierRunner.run(arguments, databaseURL: databaseURL)
        XCTAssertEqual(result.status, 0, "\(arguments): \(result.stderr)", file: file, line: line)
        XCTAssertEqual(result.stderr, "", "\(arguments)", file: file, line: line)
        XCTAssertFalse(result.stdout.contains("\u{1B}"), "\(arguments) printed an escape", file: file, line: line)
        for fragment in fragments {
            XCTAssertTrue(
                result.stdout.contains(fragment), "\(arguments): \(fragment) not in \(result.stdout)", file: file, line: line)
        }
        if arguments.contains("--json") {
            XCTAssertNoThrow(try result.json(), "\(arguments): \(result.stdout)", file: file, line: line)
        }
    }

    func testInfiniteAndFarDatesAndHugeNumbersPrintAsText() throws {
        try dropCheckConstraints()
        let infinite = try insertRaw(state: "pending", runAt: "infinity", finishedAt: nil)
        let negative = try insertRaw(state: "retrying", runAt: "-infinity", finishedAt: nil, attempt: 2_147_483_647,
                                     schedule: "{178000000 years,5 seconds}")
        let far = try insertRaw(
            state: "running", runAt: "200000-01-01 00:00:00+00", finishedAt: nil, lockedUntil: "infinity")
        let ancient = try insertRaw(
            state: "dead", runAt: "4713-01-01 00:00:00+00 BC", finishedAt: "294276-12-31 00:00:00+00")
        let deadForever = try insertRaw(state: "dead", runAt: "now", finishedAt: "infinity")
        try connection.query(
            """
            INSERT INTO courier.jobs (queue, url)
            VALUES ('odd' || chr(27) || '[2J' || chr(10) || 'queue', 'https://example.com/q')
            """)
        try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, error, worker)
            VALUES ($1, 1, '-infinity', 'infinity', 'Infinity', 2147483647, 'odd', 'w'),
                   ($1, 2, '100000-01-01', '100000-01-01', 'NaN', -2147483648, NULL, 'w')
            """, [ancient])

        for json in [false, true] {
            let flag = json ? ["--json"] : []
            try assertShows(["jobs", "list"] + flag, ["infinity", "-infinity", "200000-01-01"])
            try assertShows(["jobs", "show", String(infinite)] + flag, ["infinity"])
            try assertShows(["jobs", "show", String(negative)] + flag, ["-infinity", "2147483647"])
            try assertShows(["jobs", "show", String(far)] + flag, ["200000-01-01"])
            try assertShows(["jobs", "show", String(ancient)] + flag, ["BC", "294276-12-31", "100000-01-01"])
            try assertShows(["dead", "list"] + flag, ["294276-12-31", "infinity"])
            try assertShows(["dead", "show", String(ancient)] + flag, ["BC"])
            try assertShows(["dead", "show", String(deadForever)] + flag, ["infinity"])
            try assertShows(["stats"] + flag, ["oddqueue"])
            try assertShows(["queues", "list"] + flag, ["oddqueue"])
        }
        let json = try CourierRunner.run(["jobs", "show", String(infinite), "--json"], databaseURL: databaseURL)
        let object = try XCTUnwrap(try json.json() as? [String: Any])
        XCTAssertEqual(object["run_at"] as? String, "infinity")
        let attempts = try CourierRunner.run(["jobs", "show", String(ancient), "--json"], databaseURL: databaseURL)
        let rows = try XCTUnwrap((try attempts.json() as? [String: Any])?["attempts"] as? [[String: Any]])
        XCTAssertEqual(rows.first?["duration_ms"] as? String, "inf")
        XCTAssertEqual(rows.first?["started_at"] as? String, "-infinity")
    }

    func testAFarFutureRunAtIsRefusedAtEnqueueWithoutACrash() throws {
        for at in ["300000-01-01T00:00:00Z", "+300000-01-01T00:00:00Z", "10000-01-01T00:00:00Z"] {
            let result = try courier("enqueue", "--url", "https://example.com/x", "--at", at)
            assertFails(result, code: 2, mentioning: "--at")
        }
        XCTAssertEqual(try jobCount, 0)
    }
}
