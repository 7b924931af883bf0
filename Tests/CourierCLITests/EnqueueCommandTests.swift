import CourierTesting
import Foundation
import XCTest

final class EnqueueCommandTests: CLITestCase {
    func testEnqueuePrintsTheIdAndStoresTheRequest() throws {
        let result = try courier(
            "enqueue", "--url", "https://example.com/hook", "--data", #"{"event":"paid"}"#, "--header", "X-Tenant: 42",
            "--queue", "billing", "--delay", "5m", "--max-attempts", "3", "--priority=-2")
        XCTAssertEqual(result.status, 0, result.stderr)
        let id = try XCTUnwrap(Int64(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        let row = try connection.query(
            """
            SELECT queue, max_attempts, priority, headers->>'X-Tenant', headers->>'Content-Type', convert_from(body, 'UTF8'),
                   run_at > now() + interval '4 minutes'
            FROM courier.jobs WHERE id = $1
            """, [id])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "billing")
        XCTAssertEqual(try row.decode(1, as: Int.self), 3)
        XCTAssertEqual(try row.decode(2, as: Int.self), -2)
        XCTAssertEqual(try row.decode(3, as: String.self), "42")
        XCTAssertEqual(try row.decode(4, as: String.self), "application/json")
        XCTAssertEqual(try row.decode(5, as: String.self), #"{"event":"paid"}"#)
        XCTAssertTrue(try row.decode(6, as: Bool.self))
    }

    func testJSONOutputAndIdempotencyKeyReturnTheFirstJob() throws {
        let first = try courier("enqueue", "--url", "https://example.com/a", "--idempotency-key", "order-1", "--json")
        let second = try courier("enqueue", "--url", "https://example.com/a", "--idempotency-key", "order-1", "--json")
        XCTAssertEqual(first.status, 0, first.stderr)
        let a = try XCTUnwrap((try first.json() as? [String: Any])?["id"] as? Int)
        let b = try XCTUnwrap((try second.json() as? [String: Any])?["id"] as? Int)
        XCTAssertEqual(a, b)
        XCTAssertEqual(try jobCount, 1)
    }

    func testDataFromStdin() throws {
        let result = try courier("enqueue", "--url", "https://example.com/a", "--data", "-", stdin: Data("plain text".utf8))
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE body = 'plain text'::bytea AND NOT headers ? 'Content-Type'"), 1)
    }

    func testBadInputsExitTwoWithOneLineAndWriteNothing() throws {
        assertFails(try courier("enqueue", "--url", "ftp://example.com/x"), code: 2, mentioning: "url must be an absolute http or https URL")
        assertFails(try courier("enqueue", "--url", "https://example.com", "--header", "NoColonHere"), code: 2, mentioning: "expected 'Name: value'")
        // Without its colon a header's value cannot be told from its name: none of it is echoed,
        // since it may be a credential.
        let missingColon = try courier("enqueue", "--url", "https://example.com", "--header", "Authorization Bearer sk_live_42")
        assertFails(missingColon, code: 2, mentioning: "without a colon")
        XCTAssertFalse((missingColon.stdout + missingColon.stderr).contains("sk_live_42"), missingColon.stderr)
        assertFails(try courier("enqueue", "--url", "https://example.com", "--delay", "soon"), code: 2, mentioning: "--delay")
        assertFails(try courier("enqueue", "--url", "https://example.com", "--at", "tomorrow"), code: 2, mentioning: "--at")
        assertFails(try courier("enqueue", "--url", "https://example.com", "--method", "FETCH"), code: 2, mentioning: "method must be one of")
        assertFails(try courier("enqueue", "--url", "https://example.com", "--max-attempts", "0"), code: 2, mentioning: "--max-attempts must be between 1 and 1000")
        assertFails(try courier("enqueue", "--url", "https://example.com", "--header", "Bad: a\u{1}b"), code: 2, mentioning: "control character")
        assertFails(try courier("enqueue", "--data", "{}"), code: 2, mentioning: "--url")
        XCTAssertEqual(try jobCount, 0)
    }

    func testUnreachableDatabaseFailsWithOneLineWithoutThePassword() throws {
        let result = try CourierRunner.run(
            ["enqueue", "--url", "https://example.com/a"],
            databaseURL: "postgresql://courier:hunter2secret@127.0.0.1:1/courier?connect_timeout=2")
        assertFails(result, code: 1, mentioning: "cannot connect to PostgreSQL")
        XCTAssertFalse(result.stderr.contains("hunter2secret"))
    }

    func testBulkEnqueueWithOneBadLineInsertsNothingAndNamesTheLine() throws {
        // Three COPY pieces of the default 10,000 lines, the bad line in the middle one: a whole
        // piece has reached the server before it, and still nothing is inserted.
        let file = try jsonlFile(lines: 30_000, badLine: 15_001)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try courier("enqueue", "--jsonl", file.path)
        XCTAssertEqual(result.status, 2, result.stderr)
        XCTAssertTrue(result.stderr.contains("line 15001: url must be an absolute http or https URL"), result.stderr)
        XCTAssertTrue(result.stderr.contains("nothing was inserted"), result.stderr)
        XCTAssertEqual(try jobCount, 0)

        let skipping = try courier("enqueue", "--jsonl", file.path, "--skip-invalid", "--json")
        XCTAssertEqual(skipping.status, 0, skipping.stderr)
        let report = try XCTUnwrap(try skipping.json() as? [String: Any])
        XCTAssertEqual(report["inserted"] as? Int, 29_999)
        XCTAssertEqual(report["lines"] as? Int, 30_000)
        let rejected = try XCTUnwrap(report["rejected"] as? [[String: Any]])
        XCTAssertEqual(rejected.first?["line"] as? Int, 15_001)
        XCTAssertEqual(try jobCount, 29_999)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE headers->>'Content-Type' = 'application/json'"), 29_999)
    }

    func testBulkEnqueueReportsMalformedJSONAndUnknownFieldsByLine() throws {
        let lines = [
            #"{"url": "https://example.com/1", "payload": {"a": 1}, "queue": "q1", "delay": "1m", "idempotency_key": "k"}"#,
            #"{"url": "https://example.com/2", "payload": {"a": 2}"#,
            #"{"url": "https://example.com/3", "paylaod": {"a": 3}}"#,
            #"{"url": "https://example.com/4", "headers": {"X": "1"}, "body": "raw", "max_attempts": 2}"#,
            #"{"url": "https://example.com/5", "payload": 5, "idempotency_key": "k", "queue": "q1"}"#,
        ]
        let input = Data((lines.joined(separator: "\n") + "\n").utf8)
        let strict = try courier("enqueue", "--jsonl", "-", stdin: input)
        XCTAssertEqual(strict.status, 2)
        XCTAssertTrue(strict.stderr.contains("line 2: not valid JSON"), strict.stderr)
        XCTAssertTrue(strict.stderr.contains(#"line 3: unknown field "paylaod""#), strict.stderr)
        XCTAssertEqual(try jobCount, 0)

        let lenient = try courier("enqueue", "--jsonl", "-", "--skip-invalid", "--json", stdin: input)
        XCTAssertEqual(lenient.status, 0, lenient.stderr)
        let report = try XCTUnwrap(try lenient.json() as? [String: Any])
        XCTAssertEqual(report["inserted"] as? Int, 2)
        XCTAssertEqual(report["duplicates"] as? Int, 1, "line 5 repeats line 1's idempotency key in q1")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE queue = 'q1' AND run_at > now() + interval '50 seconds'"), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE max_attempts = 2 AND body = 'raw'::bytea"), 1)
    }

    private func jsonlFile(lines: Int, badLine: Int) throws -> URL {
        var text = ""
        text.reserveCapacity(lines * 120)
        for number in 1...lines {
            if number == badLine {
                text += #"{"url": "not-a-url", "payload": {"n": 0}}"# + "\n"
            } else {
                text += #"{"url": "https://example.com/hook", "payload": {"n": \#(number), "event": "invoice.paid"}}"# + "\n"
            }
        }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-\(UUID().uuidString).jsonl")
        try Data(text.utf8).write(to: url)
        return url
    }
}
