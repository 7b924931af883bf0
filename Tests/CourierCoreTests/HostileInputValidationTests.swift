import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0004: `courier.enqueue` accepts only what a worker can deliver, and the table guards
/// refuse the same rows when they are written around it.
final class HostileInputValidationTests: XCTestCase {
    private var databaseURL: String!
    private var connection: PostgresConnection!

    /// A value planted in header values: no error message may echo it.
    private static let plantedSecret = "s3cr3t-t0ken-4242"

    override func setUpWithError() throws {
        databaseURL = try TestDatabase.shared(label: "hostile")
        connection = try PostgresConnection(databaseURL)
        try connection.simpleQuery("TRUNCATE courier.jobs CASCADE; TRUNCATE courier.queues")
    }

    override func tearDown() {
        connection?.close()
    }

    private struct Call {
        let name: String
        var url = "https://hooks.example.com/x"
        var method = "POST"
        var headers = "{}"
        var runAt: String? = nil
        var retrySchedule: String? = nil
        var payloadBytes = 2
        /// The SQLSTATE: 22023 from Courier's rules, or the server's own for a value that cannot
        /// even be a parameter of the type (NUL in JSON, a date beyond timestamptz).
        var sqlState = "22023"
        let expected: String
    }

    private func enqueue(_ call: Call) throws -> Int64 {
        let payload = call.payloadBytes <= 2 ? "{}" : "\"" + String(repeating: "x", count: call.payloadBytes - 2) + "\""
        return try connection.query(
            """
            SELECT courier.enqueue(url => $1, payload => $2::jsonb, method => $3, headers => $4::jsonb,
                run_at => coalesce($5::timestamptz, now()), retry_schedule => $6::interval[])
            """,
            [call.url, payload, call.method, call.headers, call.runAt, call.retrySchedule])[0].decode(0)
    }

    func testEachHostileInputIsRefusedWithOneClearErrorAndWritesNothing() throws {
        let secret = Self.plantedSecret
        let manyHeaders = "{" + (1...65).map { "\"X-H\($0)\": \"v\"" }.joined(separator: ", ") + "}"
        let bigHeaders = "{" + (1...9).map { "\"X-H\($0)\": \"\(String(repeating: "v", count: 8000))\"" }
            .joined(separator: ", ") + "}"
        let cases: [Call] = [
            // Ports, schemes, hosts, characters of the URL.
            Call(name: "port 0", url: "https://hooks.example.com:0/x",
                expected: "url port must be a number between 1 and 65535"),
            Call(name: "port 65536", url: "https://hooks.example.com:65536/x",
                expected: "url port must be a number between 1 and 65535"),
            Call(name: "port 99999", url: "http://hooks.example.com:99999/x",
                expected: "url port must be a number between 1 and 65535"),
            Call(name: "port of 20 digits", url: "http://a.example:99999999999999999999/",
                expected: "url port must be a number"),
            Call(name: "empty port", url: "http://a.example:/", expected: "url port must be a number"),
            Call(name: "ftp", url: "ftp://files.example.com/x", expected: "url must be an absolute http or https URL"),
            Call(name: "javascript", url: "javascript:alert(1)", expected: "url must be an absolute http or https URL"),
            Call(name: "relative", url: "/hooks", expected: "url must be an absolute http or https URL"),
            Call(name: "no host", url: "https:///x", expected: "url has no valid host"),
            Call(name: "host with underscore", url: "https://a_b.example/", expected: "url has no valid host"),
            Call(name: "host label too long", url: "https://\(String(repeating: "a", count: 64)).example/",
                expected: "url has no valid host"),
            Call(name: "unclosed IPv6", url: "https://[::1/x", expected: "url has no valid host"),
            Call(name: "IPv4 in brackets", url: "https://[127.0.0.1]/x", expected: "url has no valid host"),
            Call(name: "bad IPv6", url: "https://[1:2:3:4:5:6:7:8:9]/x", expected: "url has no valid host"),
            Call(name: "credentials", url: "https://user:\(secret)@a.example/",
                expected: "url must not contain credentials"),
            Call(name: "space", url: "https://a.example/x y",
                expected: "url must not contain spaces or control characters"),
            Call(name: "CR LF in url", url: "https://a.example/x\r\nInjected: 1",
                expected: "url must not contain spaces or control characters"),
            Call(name: "tab in url", url: "https://a.example/\tx",
                expected: "url must not contain spaces or control characters"),
            Call(name: "DEL in url", url: "https://a.example/\u{7F}",
                expected: "url must not contain spaces or control characters"),
            Call(name: "non-ASCII url", url: "https://a.example/\u{FC}",
                expected: "url must contain only ASCII characters"),
            Call(name: "non-ASCII host", url: "https://b\u{FC}cher.example/",
                expected: "url must contain only ASCII characters"),
            Call(name: "brace in path", url: "https://a.example/{x}", expected: "must be percent-encoded"),
            Call(name: "bracket in path", url: "https://a.example/[x]", expected: "must be percent-encoded"),
            Call(name: "broken percent", url: "https://a.example/%zz", expected: "percent-encoded byte"),
            Call(name: "truncated percent", url: "https://a.example/%4", expected: "percent-encoded byte"),
            Call(name: "url too long", url: "https://a.example/" + String(repeating: "x", count: 8200),
                expected: "url is longer than 8192 bytes"),
            // Methods.
            Call(name: "CR LF in method", method: "GET\r\nX-Evil: 1", expected: "method must be an HTTP token"),
            Call(name: "space in method", method: "GET /EVIL", expected: "method must be an HTTP token"),
            Call(name: "non-ASCII method", method: "P\u{D6}ST", expected: "method must be an HTTP token"),
            Call(name: "dotless i upper-cases to ASCII", method: "opt\u{131}ons",
                expected: "method must be an HTTP token"),
            Call(name: "long method", method: String(repeating: "A", count: 33),
                expected: "method must be an HTTP token"),
            Call(name: "empty method", method: "", expected: "method is required"),
            Call(name: "unknown token", method: "BREW", expected: "method must be one of GET, POST"),
            // Headers.
            Call(name: "X-\u{DC}n\u{EF}", headers: #"{"X-\#u{DC}n\#u{EF}": "v"}"#,
                expected: "is not a legal header name"),
            Call(name: "space in name", headers: #"{"X A": "v"}"#, expected: "is not a legal header name"),
            Call(name: "colon in name", headers: #"{"X-A:": "v"}"#, expected: "is not a legal header name"),
            Call(name: "CR LF in name", headers: #"{"X-A\r\nX-B": "v"}"#, expected: "is not a legal header name"),
            Call(name: "empty name", headers: #"{"": "v"}"#, expected: "is not a legal header name"),
            Call(name: "CR LF in value", headers: #"{"X-Token": "\#(secret)\r\nX-Injected: 1"}"#,
                expected: "contains CR, LF or another control character"),
            Call(name: "LF in value", headers: #"{"X-Token": "\#(secret)\n"}"#,
                expected: "contains CR, LF or another control character"),
            Call(name: "control in value", headers: #"{"X-Token": "\#(secret)\u0001"}"#,
                expected: "contains CR, LF or another control character"),
            Call(name: "DEL in value", headers: #"{"X-Token": "\#(secret)\u007f"}"#,
                expected: "contains CR, LF or another control character"),
            Call(name: "NUL in value", headers: #"{"X-Token": "\#(secret)\u0000"}"#, sqlState: "22P05",
                expected: "unsupported Unicode escape sequence"),
            Call(name: "headers scalar", headers: #""x""#, expected: "headers must be a JSON object of strings"),
            Call(name: "headers null", headers: "null", expected: "headers must be a JSON object of strings"),
            Call(name: "headers array", headers: "[]", expected: "headers must be a JSON object of strings"),
            Call(name: "nested object", headers: #"{"X-A": {"b": "c"}}"#,
                expected: "headers: the value of X-A must be a string"),
            Call(name: "number value", headers: #"{"X-A": 1}"#, expected: "headers: the value of X-A must be a string"),
            Call(name: "null value", headers: #"{"X-A": null}"#,
                expected: "headers: the value of X-A must be a string"),
            Call(name: "65 headers", headers: manyHeaders, expected: "headers has more than 64 entries"),
            Call(name: "header set over 64 KiB", headers: bigHeaders, expected: "headers total"),
            Call(name: "value over 8 KiB", headers: #"{"X-A": "\#(String(repeating: "v", count: 8193))"}"#,
                expected: "longer than 8192 bytes"),
            Call(name: "reserved header", headers: #"{"Transfer-Encoding": "chunked"}"#, expected: "is set by Courier"),
            // Times and schedules.
            Call(name: "run_at infinity", runAt: "infinity", expected: "run_at must be a finite time"),
            Call(name: "run_at -infinity", runAt: "-infinity", expected: "run_at must be a finite time"),
            Call(name: "run_at year 294000", runAt: "294000-01-01", expected: "run_at is more than 1 year ahead"),
            Call(name: "run_at 13 months ahead", runAt: iso(Date().addingTimeInterval(396 * 86_400)),
                expected: "run_at is more than 1 year ahead"),
            Call(name: "run_at year 300000", runAt: "300000-01-01", sqlState: "22008", expected: "out of range"),
            Call(name: "schedule 1000000 years", retrySchedule: "{1000000 years}",
                expected: "retry_schedule must hold 1 to 100 delays, each between 0 and 30 days"),
            Call(name: "schedule 31 days", retrySchedule: "{1 second, 31 days}",
                expected: "each between 0 and 30 days"),
            Call(name: "schedule negative", retrySchedule: "{-1 second}", expected: "each between 0 and 30 days"),
            Call(name: "schedule NULL entry", retrySchedule: "{1 second, NULL}",
                expected: "each between 0 and 30 days"),
            Call(name: "schedule empty", retrySchedule: "{}", expected: "retry_schedule must hold 1 to 100 delays"),
            // Sizes.
            Call(name: "body over 1 MiB", payloadBytes: 1_048_577, expected: "above the limit of 1048576 bytes"),
        ]
        for call in cases {
            XCTAssertThrowsError(try enqueue(call), call.name) { error in
                guard let error = error as? PostgresError else { return XCTFail("\(call.name): \(error)") }
                XCTAssertEqual(error.sqlState, call.sqlState, "\(call.name): \(error)")
                XCTAssertTrue(error.message.contains(call.expected), "\(call.name): \(error.message)")
                XCTAssertFalse(error.message.contains(Self.plantedSecret),
                    "\(call.name) echoes a secret: \(error.message)")
                XCTAssertFalse(error.message.contains("\r") || error.message.contains("\n"),
                    "\(call.name): \(error.message)")
            }
            XCTAssertEqual(try jobCount(), 0, call.name)
        }
    }

    func testEdgeValuesAWorkerCanDeliverAreAccepted() throws {
        let cases: [Call] = [
            Call(name: "port 1", url: "http://hooks.example.com:1/x", expected: ""),
            Call(name: "port 65535", url: "https://hooks.example.com:65535/x?a=1&b=%2F#frag", expected: ""),
            Call(name: "IPv6 literal", url: "https://[2001:db8::1]:8443/x", expected: ""),
            Call(name: "IPv4-mapped literal", url: "http://[::ffff:127.0.0.1]/x", expected: ""),
            Call(name: "upper-case scheme and trailing dot", url: "HTTPS://Hooks.Example.COM./x", expected: ""),
            Call(name: "every token character", headers: #"{"X-!#$%&'*+.^_`|~09az": "v"}"#, expected: ""),
            Call(name: "tab, space and obs-text in a value", headers: #"{"X-A": "a\tb c \u00e9\u0085"}"#, expected: ""),
            Call(name: "lower-case method", method: "patch", expected: ""),
            Call(name: "11 months ahead", runAt: iso(Date().addingTimeInterval(330 * 86_400)), expected: ""),
            Call(name: "far past", runAt: "1970-01-01T00:00:00Z", expected: ""),
            Call(name: "30 days and 0 seconds", retrySchedule: "{0 seconds, 30 days, 720 hours}", expected: ""),
            Call(name: "1 MiB body", payloadBytes: 1_048_576, expected: ""),
        ]
        for call in cases {
            XCTAssertNoThrow(try enqueue(call), call.name)
        }
        XCTAssertEqual(try jobCount(), cases.count)
        XCTAssertEqual(
            try connection.query("SELECT method FROM courier.jobs WHERE method <> 'POST'")[0].decode(0,
                as: String.self),
            "PATCH")
    }

    func testQueueWindowIsConfigurableAndBounded() throws {
        try connection.query(
            "INSERT INTO courier.queues (name, max_schedule_ahead) VALUES ('later', '3 years'), ('soon', '1 hour')")
        let sql = "SELECT courier.enqueue(url => 'https://a.example/', payload => '{}', queue => $1, run_at => now() + $2::interval)"
        XCTAssertNoThrow(try connection.query(sql, ["later", "2 years"]))
        XCTAssertNoThrow(try connection.query(sql, ["soon", "59 minutes"]))
        XCTAssertThrowsError(try connection.query(sql, ["soon", "2 hours"])) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "22023")
            XCTAssertTrue((error as? PostgresError)?.message.contains("run_at is more than 01:00:00 ahead") == true,
                "\(error)")
        }
        XCTAssertThrowsError(try connection.query(sql, ["default", "2 years"]))
        XCTAssertEqual(try jobCount(), 2)
        for window in ["11 years", "-1 second"] {
            XCTAssertThrowsError(
                try connection.query("UPDATE courier.queues SET max_schedule_ahead = $1::interval WHERE name = 'later'", [window])
            ) { error in
                XCTAssertEqual((error as? PostgresError)?.sqlState, "23514", window)
            }
        }
    }

    func testJobProblemNamesTheSameProblemsForTheBulkLoader() throws {
        func problem(url: String, method: String = "POST", headers: String = "{}",
            runAt: String = "now") throws -> String? {
            try connection.query(
                "SELECT courier.job_problem($1, $2, $3::jsonb, 'default', 0, NULL, 0, NULL, NULL, $4::timestamptz)",
                [url, method, headers, runAt])[0].decode(0)
        }
        XCTAssertNil(try problem(url: "https://a.example:443/"))
        XCTAssertEqual(try problem(url: "https://a.example:99999/"), "url port must be a number between 1 and 65535")
        XCTAssertEqual(try problem(url: "https://a.example/",
            method: "GET\r\n").map { $0.hasPrefix("method must be an HTTP token") }, true)
        XCTAssertEqual(try problem(url: "https://a.example/",
            headers: #"{"X-\#u{DC}n\#u{EF}": "v"}"#)?.contains("not a legal header name"), true)
        XCTAssertEqual(try problem(url: "https://a.example/", runAt: "infinity"),
            "run_at must be a finite time, not infinity")

        let store = AdminStore(connection: connection)
        let good = NewJob(url: "https://example.com/ok")
        var port = good
        port.url = "https://example.com:0/"
        var smuggled = good
        smuggled.method = "GET\r\nX-Evil: 1"
        var unicode = good
        unicode.headers = [("X-\u{DC}n\u{EF}", "v")]
        XCTAssertThrowsError(try store.importJobs([[(1, good), (2, port), (3, smuggled), (4, unicode)]],
            skipInvalid: false)) { error in
            XCTAssertEqual((error as? ImportRejected)?.problems.map(\.line), [2, 3, 4])
        }
        XCTAssertEqual(try jobCount(), 0)
        XCTAssertEqual(try store.importJobs([[(1, good), (2, port), (3, smuggled), (4, unicode)]],
            skipInvalid: true).inserted, 1)
    }

    func testBulkImportNamesTheLinesWhoseRunAtIsBeyondTheQueueWindow() throws {
        // The table's insert trigger would refuse the whole load; the loader must name the lines
        // instead, so --skip-invalid can skip them.
        try connection.query("INSERT INTO courier.queues (name, max_schedule_ahead) VALUES ('soon', '1 day')")
        let store = AdminStore(connection: connection)
        let good = NewJob(url: "https://example.com/ok")
        var farRunAt = good
        farRunAt.runAt = Date().addingTimeInterval(2 * 365 * 86_400)
        var farDelay = good
        farDelay.delay = .seconds(2 * 365 * 86_400)
        var soonQueue = good
        soonQueue.queue = "soon"
        soonQueue.delay = .seconds(2 * 86_400)
        var soonOK = soonQueue
        soonOK.delay = .seconds(3_600)
        let lines = [[(1, good), (2, farRunAt), (3, farDelay), (4, soonQueue), (5, soonOK)]]
        XCTAssertThrowsError(try store.importJobs(lines, skipInvalid: false)) { error in
            let problems = (error as? ImportRejected)?.problems ?? []
            XCTAssertEqual(problems.map(\.line), [2, 3, 4], "\(error)")
            XCTAssertTrue(problems.allSatisfy { $0.reason.hasPrefix("run_at is more than") }, "\(problems)")
        }
        XCTAssertEqual(try jobCount(), 0)
        XCTAssertEqual(try store.importJobs(lines, skipInvalid: true).inserted, 2)
    }

    func testRawWritesAroundEnqueueAreRefusedByTheTableGuards() throws {
        let id: Int64 = try connection.query(
            "SELECT courier.enqueue(url => 'https://a.example/x', payload => '{}', max_attempts => 3)")[0].decode(0)
        struct Raw {
            let name: String
            let sql: String
            let sqlState: String
        }
        let insert = "INSERT INTO courier.jobs (url, method, headers, run_at, attempt, max_attempts, retry_schedule, state, locked_by, locked_until, finished_at) VALUES "
        let cases: [Raw] = [
            Raw(name: "port 99999",
                sql: insert + "('https://a.example:99999/', 'POST', '{}', now(), 0, 10, NULL, 'pending', NULL, NULL, NULL)", sqlState: "22023"),
            Raw(name: "port 0",
                sql: insert + "('https://a.example:0/', 'POST', '{}', now(), 0, 10, NULL, 'pending', NULL, NULL, NULL)", sqlState: "22023"),
            Raw(name: "CR LF method",
                sql: insert + "('https://a.example/', E'GET\\r\\nX: 1', '{}', now(), 0, 10, NULL, 'pending', NULL, NULL, NULL)", sqlState: "22023"),
            Raw(name: "X-\u{DC}n\u{EF}",
                sql: insert + "('https://a.example/', 'POST', '{\"X-\u{DC}n\u{EF}\": \"v\"}', now(), 0, 10, NULL, 'pending', NULL, NULL, NULL)", sqlState: "22023"),
            Raw(name: "headers scalar",
                sql: insert + "('https://a.example/', 'POST', '\"x\"', now(), 0, 10, NULL, 'pending', NULL, NULL, NULL)", sqlState: "22023"),
            Raw(name: "headers null",
                sql: insert + "('https://a.example/', 'POST', 'null', now(), 0, 10, NULL, 'pending', NULL, NULL, NULL)", sqlState: "22023"),
            Raw(name: "run_at 2 years ahead",
                sql: insert + "('https://a.example/', 'POST', '{}', now() + interval '2 years', 0, 10, NULL, 'pending', NULL, NULL, NULL)", sqlState: "22023"),
            Raw(name: "run_at infinity",
                sql: insert + "('https://a.example/', 'POST', '{}', 'infinity', 0, 10, NULL, 'pending', NULL, NULL, NULL)", sqlState: "23514"),
            Raw(name: "attempt 2147483647",
                sql: insert + "('https://a.example/', 'POST', '{}', now(), 2147483647, 10, NULL, 'pending', NULL, NULL, NULL)", sqlState: "23514"),
            Raw(name: "waiting at max_attempts",
                sql: insert + "('https://a.example/', 'POST', '{}', now(), 10, 10, NULL, 'retrying', NULL, NULL, NULL)", sqlState: "23514"),
            Raw(name: "schedule 1000000 years",
                sql: insert + "('https://a.example/', 'POST', '{}', now(), 0, 10, '{1000000 years}', 'pending', NULL, NULL, NULL)", sqlState: "23514"),
            Raw(name: "infinite lease",
                sql: insert + "('https://a.example/', 'POST', '{}', now(), 1, 10, NULL, 'running', 'w', 'infinity', NULL)", sqlState: "23514"),
            Raw(name: "lease a year ahead",
                sql: insert + "('https://a.example/', 'POST', '{}', now(), 1, 10, NULL, 'running', 'w', now() + interval '1 year', NULL)", sqlState: "23514"),
            Raw(name: "bulk with one bad row",
                sql: "INSERT INTO courier.jobs (url) SELECT 'https://a.example:' || g || '/' FROM generate_series(65530, 65536) g", sqlState: "22023"),
            Raw(name: "update url", sql: "UPDATE courier.jobs SET url = 'https://a.example:65536/' WHERE id = \(id)",
                sqlState: "22023"),
            Raw(name: "update method", sql: "UPDATE courier.jobs SET method = E'POST\\r\\n' WHERE id = \(id)",
                sqlState: "22023"),
            Raw(name: "update headers null", sql: "UPDATE courier.jobs SET headers = 'null' WHERE id = \(id)",
                sqlState: "22023"),
            Raw(name: "update header value",
                sql: "UPDATE courier.jobs SET headers = '{\"X-A\": \"a\\r\\nb\"}' WHERE id = \(id)", sqlState: "22023"),
            Raw(name: "update attempt", sql: "UPDATE courier.jobs SET attempt = 2147483647 WHERE id = \(id)",
                sqlState: "23514"),
            Raw(name: "update attempt to max", sql: "UPDATE courier.jobs SET attempt = 3 WHERE id = \(id)",
                sqlState: "23514"),
            Raw(name: "update run_at", sql: "UPDATE courier.jobs SET run_at = 'infinity' WHERE id = \(id)",
                sqlState: "23514"),
            Raw(name: "update run_at 294000", sql: "UPDATE courier.jobs SET run_at = '294000-01-01' WHERE id = \(id)",
                sqlState: "23514"),
            Raw(name: "update schedule",
                sql: "UPDATE courier.jobs SET retry_schedule = '{1000000 years}' WHERE id = \(id)", sqlState: "23514"),
            Raw(name: "queue schedule",
                sql: "INSERT INTO courier.queues (name, retry_schedule) VALUES ('huge', '{1000000 years}')",
                sqlState: "23514"),
            Raw(name: "queue schedule infinity-like",
                sql: "INSERT INTO courier.queues (name, retry_schedule) VALUES ('huge', '{5 seconds, 31 days}')",
                sqlState: "23514"),
        ]
        let before = try rowFingerprint()
        for raw in cases {
            XCTAssertThrowsError(try connection.simpleQuery(raw.sql), raw.name) { error in
                XCTAssertEqual((error as? PostgresError)?.sqlState, raw.sqlState, "\(raw.name): \(error)")
            }
        }
        XCTAssertEqual(try rowFingerprint(), before, "a refused write changed a row")
        XCTAssertEqual(try connection.query("SELECT count(*) FROM courier.queues")[0].decode(0, as: Int.self), 0)
    }

    func testWorkerStatementsNeverRecheckTheRequest() throws {
        // A row whose request breaks the rules, written with the guard off (as an old version or
        // a restore could have): the claim, heartbeat, release, outcome and rescue statements do
        // not touch the request columns, so the request trigger does not fire and they work; the
        // worker itself dead-letters such a row.
        let url = try TestDatabase.create(label: "hotpath")
        defer { TestDatabase.drop(url) }
        let owner = try PostgresConnection(url)
        defer { owner.close() }
        let queue = "hot"
        try owner.simpleQuery(
            """
            ALTER TABLE courier.jobs DISABLE TRIGGER jobs_check_inserted;
            INSERT INTO courier.jobs (queue, url, headers) VALUES ('hot', 'https://a.example:99999/',
                '{"X-\u{DC}n\u{EF}": "v"}');
            ALTER TABLE courier.jobs ENABLE TRIGGER jobs_check_inserted;
            """)
        let store = JobStore(connection: owner, workerID: "w1")
        let claimed = try store.claim(queues: [queue], limit: 10, lease: .seconds(30))
        XCTAssertEqual(claimed.count, 1)
        XCTAssertEqual(try store.heartbeat(claimed.map(\.id), lease: .seconds(30)), Set(claimed.map(\.id)))
        XCTAssertEqual(try store.release(claimed.map { ($0.id, $0.attempt) }, delay: .zero), 1)
        let again = try store.claim(queues: [queue], limit: 10, lease: .seconds(30))
        let now = Date()
        XCTAssertEqual(
            try store.recordOutcomes([
                AttemptRecord(jobID: again[0].id, attempt: again[0].attempt, transition: .dead(reason: "invalid URL"),
                              delivery: .failure(.invalidRequest, error: "invalid URL"), startedAt: now, finishedAt: now)
            ]).changed, [again[0].id])
        XCTAssertEqual(try owner.query("SELECT state::text FROM courier.jobs")[0].decode(0, as: String.self), "dead")
        // Changing the request itself is checked.
        XCTAssertThrowsError(try owner.query("UPDATE courier.jobs SET headers = 'null'")) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "22023")
        }
    }

    private func rowFingerprint() throws -> String {
        try connection.query(
            "SELECT coalesce(string_agg(to_jsonb(j)::text, ',' ORDER BY id), '') FROM courier.jobs j")[0].decode(0)
    }

    private func jobCount() throws -> Int {
        try connection.query("SELECT count(*) FROM courier.jobs")[0].decode(0)
    }
}

private func iso(_ date: Date) -> String {
    ISO8601DateFormatter().string(from: date)
}
