import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// `courier.enqueue(...)` as a user calls it from SQL.
final class EnqueueFunctionTests: XCTestCase {
    private var databaseURL: String!
    private var connection: PostgresConnection!

    override func setUpWithError() throws {
        databaseURL = try TestDatabase.shared(label: "enqueue")
        connection = try PostgresConnection(databaseURL)
        try connection.simpleQuery("TRUNCATE courier.jobs CASCADE; TRUNCATE courier.queues")
    }

    override func tearDown() {
        connection?.close()
    }

    func testValidCallReturnsAnIdAndTheRowHasTheDefaults() throws {
        let id: Int = try connection.query(
            "SELECT courier.enqueue(url => $1, payload => $2::jsonb)",
            ["https://example.com/hooks", PostgresJSON(#"{"event":"paid"}"#)])[0].decode(0)
        let row = try connection.query(
            """
            SELECT queue, state::text, priority, method, headers::text, convert_from(body, 'UTF8'), attempt,
                   max_attempts, run_at <= now(), finished_at IS NULL, idempotency_key, retry_schedule IS NULL
            FROM courier.jobs WHERE id = $1
            """, [id])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "default")
        XCTAssertEqual(try row.decode(1, as: String.self), "pending")
        XCTAssertEqual(try row.decode(2, as: Int.self), 0)
        XCTAssertEqual(try row.decode(3, as: String.self), "POST")
        XCTAssertEqual(try row.decode(4, as: String.self), #"{"Content-Type": "application/json"}"#)
        XCTAssertEqual(try row.decode(5, as: String.self), #"{"event": "paid"}"#)
        XCTAssertEqual(try row.decode(6, as: Int.self), 0)
        XCTAssertEqual(try row.decode(7, as: Int.self), 10)
        XCTAssertEqual(try row.decode(8, as: Bool.self), true)
        XCTAssertEqual(try row.decode(9, as: Bool.self), true)
        XCTAssertNil(try row.decode(10, as: String?.self))
        XCTAssertEqual(try row.decode(11, as: Bool.self), true)
    }

    func testNamedArgumentsAndQueueDefaultMaxAttempts() throws {
        try connection.query("INSERT INTO courier.queues (name, max_attempts) VALUES ($1, $2)", ["billing", 3])
        let id: Int = try connection.query(
            """
            SELECT courier.enqueue(url => 'http://hooks.internal:8080/x?y=1', payload => '[1,2]', method => 'put',
                headers => '{"X-Trace": "abc", "content-type": "application/vnd+json"}', queue => 'billing',
                run_at => now() + interval '1 hour', priority => 5, retry_schedule => '{1 second, 2 seconds}')
            """)[0].decode(0)
        let row = try connection.query(
            "SELECT method, max_attempts, priority, headers ->> 'content-type', headers ? 'Content-Type', run_at > now() FROM courier.jobs WHERE id = $1",
            [id])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "PUT")
        XCTAssertEqual(try row.decode(1, as: Int.self), 3)
        XCTAssertEqual(try row.decode(2, as: Int.self), 5)
        XCTAssertEqual(try row.decode(3, as: String.self), "application/vnd+json")
        XCTAssertEqual(try row.decode(4, as: Bool.self), false)
        XCTAssertEqual(try row.decode(5, as: Bool.self), true)
    }

    func testSameIdempotencyKeyInTheSameQueueReturnsTheFirstId() throws {
        let sql = "SELECT courier.enqueue(url => 'https://a.example/h', payload => '{}', queue => $1, idempotency_key => $2)"
        let first: Int = try connection.query(sql, ["q1", "order-42"])[0].decode(0)
        let again: Int = try connection.query(sql, ["q1", "order-42"])[0].decode(0)
        let otherQueue: Int = try connection.query(sql, ["q2", "order-42"])[0].decode(0)
        XCTAssertEqual(first, again)
        XCTAssertNotEqual(first, otherQueue)
        XCTAssertEqual(try jobCount(), 2)
    }

    func testRawBytesVariantKeepsArbitraryBytes() throws {
        let body: [UInt8] = [0, 159, 146, 150, 0]
        let id: Int = try connection.query(
            "SELECT courier.enqueue_raw(url => 'https://a.example/bin', body => $1, headers => '{\"Content-Type\": \"application/octet-stream\"}')",
            [body])[0].decode(0)
        XCTAssertEqual(try connection.query("SELECT body FROM courier.jobs WHERE id = $1", [id])[0].decode(0, as: [UInt8].self), body)
    }

    func testEachInvalidInputRaisesAnErrorNamingTheFieldAndWritesNothing() throws {
        struct Case {
            let name: String
            let url: String
            var method = "POST"
            var headers = "{}"
            var queue = "default"
            var maxAttempts: Int? = nil
            var payloadBytes = 10
            let expected: String
        }
        let cases: [Case] = [
            Case(name: "relative url", url: "/hooks", expected: "url must be an absolute http or https URL"),
            Case(name: "ftp url", url: "ftp://files.example/x", expected: "url must be an absolute http or https URL"),
            Case(name: "missing host", url: "https:///path", expected: "url has no valid host"),
            Case(name: "empty url", url: "", expected: "url is required"),
            Case(name: "credentials", url: "https://u:p@a.example/", expected: "url must not contain credentials"),
            Case(name: "unknown method", url: "https://a.example", method: "BREW", expected: "method must be one of"),
            Case(name: "headers array", url: "https://a.example", headers: "[]", expected: "headers must be a JSON object"),
            Case(name: "header number", url: "https://a.example", headers: #"{"X-A": 1}"#, expected: "headers: the value of X-A must be a string"),
            Case(name: "header name", url: "https://a.example", headers: #"{"X A": "v"}"#, expected: "is not a legal header name"),
            Case(name: "header CRLF", url: "https://a.example", headers: #"{"X-A": "v\r\nInjected: 1"}"#, expected: "contains CR, LF"),
            Case(name: "reserved header", url: "https://a.example", headers: #"{"Host": "evil"}"#, expected: "headers: Host is set by Courier"),
            Case(name: "empty queue", url: "https://a.example", queue: "", expected: "queue must not be empty"),
            Case(name: "bad queue", url: "https://a.example", queue: "a b", expected: "queue must be 1-128 characters"),
            Case(name: "max attempts", url: "https://a.example", maxAttempts: 0, expected: "max_attempts must be between 1 and 1000"),
            Case(name: "too big", url: "https://a.example", payloadBytes: 1_100_000, expected: "payload is"),
        ]
        for testCase in cases {
            let payload = PostgresJSON("\"" + String(repeating: "x", count: testCase.payloadBytes) + "\"")
            XCTAssertThrowsError(
                try connection.query(
                    "SELECT courier.enqueue(url => $1, payload => $2, method => $3, headers => $4::jsonb, queue => $5, max_attempts => $6)",
                    [testCase.url, payload, testCase.method, testCase.headers, testCase.queue, testCase.maxAttempts]),
                testCase.name
            ) { error in
                let pgError = error as? PostgresError
                XCTAssertEqual(pgError?.sqlState, "22023", "\(testCase.name): \(error)")
                XCTAssertTrue(pgError?.message.contains(testCase.expected) == true, "\(testCase.name): \(error)")
            }
            XCTAssertEqual(try jobCount(), 0, testCase.name)
        }
    }

    func testQueueNameCheckOnTheTableAcceptsExactlyWhatTheEnqueueRuleAccepts() throws {
        // The table's queue rule (a CHECK constraint from 0003, a trigger since 0021) is written
        // without a regular expression for speed; it must accept exactly the names
        // courier.validate_job accepts, also for rows written directly.
        let id: Int = try connection.query(
            "SELECT courier.enqueue(url => $1, payload => $2::jsonb)", ["https://example.com/x", PostgresJSON("{}")])[0].decode(0)
        let names = [
            "", "a", "billing", "Billing.v2:eu-west_1", "-._:", String(repeating: "q", count: 128),
            String(repeating: "q", count: 129), "a b", "a/b", "caf\u{E9}", "\u{1F680}", "tab\there", "x\ny", "a'b", "a%b",
        ]
        for name in names {
            let expected: Bool = try connection.query(
                "SELECT courier.job_problem('https://example.com/x', 'POST', '{}', $1, 0, NULL, 0, NULL, NULL, now()) IS NULL",
                [name])[0].decode(0)
            var accepted = true
            do {
                try connection.query("UPDATE courier.jobs SET queue = $1 WHERE id = $2", [name, id])
            } catch let error as PostgresError {
                XCTAssertEqual(error.sqlState, "23514", "\(name.debugDescription): \(error)")
                accepted = false
            }
            XCTAssertEqual(accepted, expected, "queue name \(name.debugDescription)")
        }
    }

    func testInsertWakesListenersOncePerStatementAndQueue() throws {
        let listener = try PostgresConnection(databaseURL)
        defer { listener.close() }
        try listener.listen("courier_jobs")
        try connection.query(
            """
            INSERT INTO courier.jobs (queue, url) SELECT 'bulk', 'https://a.example/' || g FROM generate_series(1, 500) g
            """)
        let notes = try listener.waitForNotifications(timeout: .seconds(5))
        XCTAssertEqual(notes.map(\.payload), ["bulk"])
        XCTAssertEqual(try listener.waitForNotifications(timeout: .milliseconds(200)).count, 0)
    }

    func testQueueStatsViewCountsPerQueueAndState() throws {
        for queue in ["a", "a", "b"] {
            try connection.query("SELECT courier.enqueue(url => 'https://a.example', payload => '{}', queue => $1)", [queue])
        }
        let rows = try connection.query("SELECT queue, state::text, jobs FROM courier.queue_stats ORDER BY queue").rows
        XCTAssertEqual(try rows.map { "\(try $0.decode(0, as: String.self)):\(try $0.decode(1, as: String.self)):\(try $0.decode(2, as: Int.self))" },
                       ["a:pending:2", "b:pending:1"])
    }

    func testEverySchemaObjectHasAComment() throws {
        let missing = try connection.query(
            """
            SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'courier' AND c.relkind IN ('r', 'v', 'i') AND obj_description(c.oid, 'pg_class') IS NULL
              AND c.relname NOT LIKE '%_pkey'
            UNION ALL
            SELECT c.relname || '.' || a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'courier' AND c.relkind IN ('r', 'v') AND a.attnum > 0 AND NOT a.attisdropped
              AND col_description(c.oid, a.attnum) IS NULL
            UNION ALL
            SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'courier' AND obj_description(p.oid, 'pg_proc') IS NULL
            """
        ).rows.map { try $0.decode(0, as: String.self) }
        XCTAssertEqual(missing, [])
    }

    private func jobCount() throws -> Int {
        try connection.query("SELECT count(*) FROM courier.jobs")[0].decode(0)
    }
}
