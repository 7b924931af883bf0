import CourierTesting
import Foundation
import Postgres
import XCTest

final class JobsAndDeadCommandTests: CLITestCase {
    func testListShowsNewestFirstAndFilters() throws {
        let old = try insertJob(url: "https://a.example/1")
        let new = try insertJob(state: "retrying", queue: "billing", url: "https://b.example/2")
        let all = try courier("jobs", "list")
        XCTAssertEqual(all.status, 0, all.stderr)
        let lines = all.stdout.split(separator: "\n")
        XCTAssertTrue(lines[0].hasPrefix("ID"))
        XCTAssertTrue(lines[1].hasPrefix("\(new) "), all.stdout)
        XCTAssertTrue(lines[2].hasPrefix("\(old) "), all.stdout)

        let filtered = try courier("jobs", "list", "--state", "retrying", "--queue", "billing", "--url-contains", "b.example", "--json")
        let rows = try XCTUnwrap(try filtered.json() as? [[String: Any]])
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows[0]["id"] as? Int, Int(new))
        for field in ["id", "queue", "state", "method", "url", "attempt", "max_attempts", "run_at", "created_at", "finished_at", "last_status", "last_error"] {
            XCTAssertNotNil(rows[0][field], "missing \(field)")
        }
        assertFails(try courier("jobs", "list", "--state", "stuck"), code: 2, mentioning: "stuck")
        assertFails(try courier("jobs", "list", "--since", "yesterdayish"), code: 2, mentioning: "--since")
    }

    func testShowRedactsSecretHeadersAndListsAttempts() throws {
        let enqueued = try courier(
            "enqueue", "--url", "https://example.com/hook", "--header", "Authorization: Bearer sk_live_abcdef",
            "--header", "X-Api-Key: key123456", "--header", "X-Tenant: 7")
        let id = try XCTUnwrap(Int64(enqueued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, error, worker)
            VALUES ($1, 1, now(), now(), 12.5, 503, 'HTTP 503 Service Unavailable', 'host-a/1')
            """, [id])
        let human = try courier("jobs", "show", String(id))
        XCTAssertEqual(human.status, 0, human.stderr)
        XCTAssertFalse(human.stdout.contains("sk_live_abcdef"))
        XCTAssertFalse(human.stdout.contains("key123456"))
        XCTAssertTrue(human.stdout.contains("X-Tenant: 7"))
        XCTAssertTrue(human.stdout.contains("HTTP 503 Service Unavailable"))
        let json = try XCTUnwrap(try courier("jobs", "show", String(id), "--json").json() as? [String: Any])
        let attempts = try XCTUnwrap(json["attempts"] as? [[String: Any]])
        XCTAssertEqual(attempts.first?["status"] as? Int, 503)
        XCTAssertFalse("\(json)".contains("sk_live_abcdef"))

        assertFails(try courier("jobs", "show", "987654"), code: 3, mentioning: "no job with id 987654")
        assertFails(try courier("jobs", "show", "abc"), code: 2, mentioning: "not a job id")
    }

    func testCancelChangesOnlyPendingOrRetryingAndSaysWhyNot() throws {
        let pending = try insertJob()
        let running = try insertJob(state: "running")
        let result = try courier("jobs", "cancel", String(pending), String(running))
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stdout.contains("1 job cancelled: \(pending)."), result.stdout)
        XCTAssertTrue(result.stderr.contains("job \(running): not cancelled: it is running"), result.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE state = 'cancelled'"), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'running'", [running]), 1)

        let missing = try courier("jobs", "cancel", "424242")
        XCTAssertEqual(missing.status, 3)
        XCTAssertTrue(missing.stderr.contains("job 424242: no such job"))
    }

    /// One id missing and one cancellable: the success on stdout, one error line on stderr
    /// for the problem (no summary line run on after it), and exit code 3.
    func testCancelOfAMissingAndAPendingJobReportsEachOnItsOwnLine() throws {
        let pending = try insertJob()
        let result = try courier("jobs", "cancel", "424242", String(pending))
        assertFails(result, code: 3, mentioning: "job 424242: no such job")
        XCTAssertEqual(result.stdout, "1 job cancelled: \(pending).\n")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'cancelled'", [pending]), 1)
    }

    func testRetryMakesAJobDueNow() throws {
        let id = try insertJob(state: "retrying")
        try connection.query("UPDATE courier.jobs SET run_at = now() + interval '1 hour' WHERE id = $1", [id])
        let result = try courier("jobs", "retry", String(id), "--json")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual((try result.json() as? [String: Any])?["changed"] as? [Int], [Int(id)])
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND run_at <= now()", [id]), 1)
    }

    func testDeadRequeueByIDKeepsHistory() throws {
        let dead = try insertJob(state: "dead", lastError: "HTTP 500")
        let alive = try insertJob(state: "succeeded")
        try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, error, worker)
            VALUES ($1, 1, now(), now(), 3, 500, 'HTTP 500', 'w')
            """, [dead])
        let list = try courier("dead", "list", "--json")
        XCTAssertEqual((try list.json() as? [[String: Any]])?.map { $0["id"] as? Int }, [Int(dead)])
        XCTAssertEqual(try courier("dead", "show", String(dead)).status, 0)
        assertFails(try courier("dead", "show", String(alive)), code: 3, mentioning: "is not dead")

        let result = try courier("dead", "requeue", String(dead))
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'pending' AND attempt = 0 AND finished_at IS NULL", [dead]), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.attempts WHERE job_id = $1", [dead]), 1)
        let again = try courier("dead", "requeue", String(dead))
        XCTAssertEqual(again.status, 1, "a pending job is not dead")
    }

    func testDeadRequeueByFilterMovesExactlyTheMatchingJobs() throws {
        var matching: [Int64] = []
        for _ in 0..<25 { matching.append(try insertJob(state: "dead", queue: "billing", lastError: "HTTP 503 Service Unavailable")) }
        let otherQueue = try insertJob(state: "dead", queue: "mail", lastError: "HTTP 503 Service Unavailable")
        let otherError = try insertJob(state: "dead", queue: "billing", lastError: "HTTP 410 Gone")
        let tooOld = try insertJob(state: "dead", queue: "billing", lastError: "HTTP 503 Service Unavailable", finishedAgo: 86_400)

        let unconfirmed = try courier("dead", "requeue", "--all", "--queue", "billing", "--error-contains", "503", "--since", "1h")
        assertFails(unconfirmed, code: 2, mentioning: "--yes")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE state = 'dead'"), 28)

        let result = try courier(
            "dead", "requeue", "--all", "--queue", "billing", "--error-contains", "503", "--since", "1h", "--yes",
            "--batch-size", "7", "--json")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual((try result.json() as? [String: Any])?["requeued"] as? Int, 25)
        XCTAssertEqual(
            try count("SELECT count(*) FROM courier.jobs WHERE state = 'pending' AND id = ANY ($1::bigint[])", [PostgresArray(matching)]), 25)
        for id in [otherQueue, otherError, tooOld] {
            XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'dead'", [id]), 1)
        }
    }
}
