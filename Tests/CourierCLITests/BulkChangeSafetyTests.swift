import CourierTesting
import Foundation
import Postgres
import XCTest

@testable import CourierCLI
@testable import CourierCLISupport

/// Commands that change many jobs by filter (`purge`, `dead requeue --all`, `jobs cancel
/// --all`) say what they would change, ask on a terminal, refuse in scripts without `--yes`,
/// and only count with `--dry-run`; durations need a unit.
final class BulkChangeSafetyTests: CLITestCase {
    func testPurgeDryRunCountsAndDeletesNothing() throws {
        for _ in 0..<3 { try insertJob(state: "dead", queue: "billing", finishedAgo: 40 * 86_400) }
        let human = try courier("purge", "--state", "dead", "--older-than", "30d", "--queue", "billing", "--dry-run")
        XCTAssertEqual(human.status, 0, human.stderr)
        XCTAssertTrue(human.stdout.contains("Would delete 3 dead jobs finished before"), human.stdout)
        XCTAssertTrue(human.stdout.contains(#"queue "billing""#), human.stdout)
        let json = try XCTUnwrap(
            try courier("purge", "--state", "dead", "--older-than", "30d", "--dry-run", "--json").json()
                as? [String: Any])
        XCTAssertEqual(json["matching"] as? Int, 3)
        XCTAssertEqual(json["deleted"] as? Int, 0)
        XCTAssertEqual(json["dry_run"] as? Bool, true)
        XCTAssertEqual(try jobCount, 3)
    }

    func testPurgeWithoutYesAndWithoutATerminalRefusesAndDeletesNothing() throws {
        try insertJob(state: "dead", finishedAgo: 40 * 86_400)
        let refused = try courier("purge", "--state", "dead", "--older-than", "30d")
        assertFails(refused, code: 2, mentioning: "--yes")
        XCTAssertTrue(refused.stderr.contains("delete 1 dead job finished"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("all queues"), refused.stderr)
        XCTAssertEqual(try jobCount, 1)

        let confirmed = try courier("purge", "--state", "dead", "--older-than", "30d", "--yes")
        XCTAssertEqual(confirmed.status, 0, confirmed.stderr)
        XCTAssertEqual(try jobCount, 0)

        let nothing = try courier("purge", "--state", "dead", "--older-than", "30d")
        XCTAssertEqual(nothing.status, 0, "nothing to delete needs no confirmation: \(nothing.stderr)")
        XCTAssertTrue(nothing.stdout.contains("No dead jobs finished before"), nothing.stdout)
    }

    func testPurgeOnATerminalAsksAndOnlyYesDeletes() throws {
        for _ in 0..<2 { try insertJob(state: "cancelled", finishedAgo: 10 * 86_400) }
        let declined = try TerminalRunner.run(
            ["purge", "--state", "cancelled", "--older-than", "7d"], databaseURL: databaseURL, typed: "n\n")
        XCTAssertEqual(declined.status, 1, declined.stderr)
        XCTAssertTrue(declined.stderr.contains("This will delete 2 cancelled jobs finished before"), declined.stderr)
        XCTAssertTrue(declined.stderr.contains("[y/N]"), declined.stderr)
        XCTAssertTrue(declined.stderr.contains("not confirmed"), declined.stderr)
        XCTAssertEqual(try jobCount, 2)

        let accepted = try TerminalRunner.run(
            ["purge", "--state", "cancelled", "--older-than", "7d"], databaseURL: databaseURL, typed: "y\n")
        XCTAssertEqual(accepted.status, 0, accepted.stderr)
        XCTAssertTrue(accepted.stdout.contains("Deleted 2 cancelled jobs"), accepted.stdout)
        XCTAssertEqual(try jobCount, 0)
    }

    func testDurationsWithoutAUnitAreRefusedWithTheUnits() throws {
        try insertJob(state: "dead", finishedAgo: 40 * 86_400)
        let bare = try courier("purge", "--state", "dead", "--older-than", "1", "--yes")
        assertFails(bare, code: 2, mentioning: "--older-than")
        for unit in ["1s", "1m", "1h", "1d"] { XCTAssertTrue(bare.stderr.contains(unit), bare.stderr) }
        XCTAssertEqual(try jobCount, 1, "a bare number must not delete anything")

        let refusals: [[String]] = [
            ["enqueue", "--url", "https://example.com/x", "--delay", "30"],
            ["enqueue", "--url", "https://example.com/x", "--retry-schedule", "5s,60"],
            ["jobs", "list", "--since", "2"],
            ["dead", "requeue", "--all", "--since", "2.5", "--yes"],
            ["stats", "--interval", "2"],
            ["worker", "--grace-period", "25"],
            ["worker", "--lease", "60"],
            ["worker", "--endpoint-disable-after", "5"],
        ]
        for arguments in refusals {
            let result = try CourierRunner.run(arguments, databaseURL: databaseURL)
            assertFails(result, code: 2, mentioning: "needs a unit")
        }
        assertFails(
            try CourierRunner.run(["worker", "--endpoint-disable-dead=-1"], databaseURL: databaseURL), code: 2,
            mentioning: "--endpoint-disable-dead must be at least 0")
        XCTAssertEqual(try jobCount, 1)
        // Zero is zero in any unit, and every unit still works.
        XCTAssertEqual(try courier("enqueue", "--url", "https://example.com/x", "--delay", "0").status, 0)
        for delay in ["500ms", "30s", "5m", "2h", "1d", "1w", "1.5h"] {
            let result = try courier("enqueue", "--url", "https://example.com/x", "--delay", delay)
            XCTAssertEqual(result.status, 0, "\(delay): \(result.stderr)")
        }
        for text in ["-5s", "1e3s", "infs", "5 parsecs", "s", ""] {
            XCTAssertNil(DurationParser.seconds(text), text)
        }
    }

    /// One job is "1 dead job", not "1 dead jobs", in the dry run and the change alike.
    func testOneJobIsSingularInBulkAndEnqueueLines() throws {
        try insertJob(state: "dead", queue: "billing", lastError: "HTTP 503")
        let dry = try courier("dead", "requeue", "--all", "--queue", "billing", "--dry-run")
        XCTAssertTrue(dry.stdout.contains("Would requeue 1 dead job ("), dry.stdout)
        let done = try courier("dead", "requeue", "--all", "--queue", "billing", "--yes")
        XCTAssertTrue(done.stdout.contains("Requeued 1 dead job ("), done.stdout)
        let line = Data(#"{"url":"https://example.com/one"}"#.utf8 + [0x0A])
        let enqueued = try courier("enqueue", "--jsonl", "-", stdin: line)
        XCTAssertEqual(enqueued.status, 0, enqueued.stderr)
        XCTAssertTrue(enqueued.stdout.hasPrefix("Inserted 1 job in "), enqueued.stdout)
    }

    func testDeadRequeueAllSaysWhatItWouldMoveAndNeedsYes() throws {
        for _ in 0..<2 { try insertJob(state: "dead", queue: "billing", lastError: "HTTP 503") }
        try insertJob(state: "dead", queue: "billing", lastError: "HTTP 410")
        let dry = try courier("dead", "requeue", "--all", "--queue", "billing", "--error-contains", "503", "--dry-run")
        XCTAssertEqual(dry.status, 0, dry.stderr)
        XCTAssertTrue(dry.stdout.contains("Would requeue 2 dead jobs"), dry.stdout)
        XCTAssertTrue(dry.stdout.contains(#"error contains "503""#), dry.stdout)
        let refused = try courier("dead", "requeue", "--all", "--queue", "billing")
        assertFails(refused, code: 2, mentioning: "requeue 3 dead jobs")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE state = 'dead'"), 3)
        let asked = try TerminalRunner.run(
            ["dead", "requeue", "--all", "--error-contains", "503"], databaseURL: databaseURL, typed: "yes\n")
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE state = 'dead'"), 1)
        assertFails(try courier("dead", "requeue", "1", "--dry-run"), code: 2, mentioning: "--dry-run applies to --all")
    }

    func testJobsCancelByFilterCancelsOnlyMatchingWaitingJobs() throws {
        var matching: [Int64] = []
        for _ in 0..<3 { matching.append(try insertJob(queue: "billing", url: "https://old.example/hook")) }
        matching.append(try insertJob(state: "retrying", queue: "billing", url: "https://old.example/hook"))
        let running = try insertJob(state: "running", queue: "billing", url: "https://old.example/hook")
        let otherURL = try insertJob(queue: "billing", url: "https://new.example/hook")
        let otherQueue = try insertJob(queue: "mail", url: "https://old.example/hook")

        let dry = try courier(
            "jobs", "cancel", "--all", "--queue", "billing", "--url-contains", "old.example", "--dry-run", "--json")
        XCTAssertEqual(dry.status, 0, dry.stderr)
        XCTAssertEqual((try dry.json() as? [String: Any])?["matching"] as? Int, 4)
        let refused = try courier("jobs", "cancel", "--all", "--queue", "billing", "--url-contains", "old.example")
        assertFails(refused, code: 2, mentioning: "cancel 4 pending or retrying jobs")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE state = 'cancelled'"), 0)

        let result = try courier(
            "jobs", "cancel", "--all", "--queue", "billing", "--url-contains", "old.example", "--yes", "--batch-size",
            "3")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("Cancelled 4 pending or retrying jobs (queue \"billing\""), result.stdout)
        XCTAssertEqual(
            try count(
                "SELECT count(*) FROM courier.jobs WHERE state = 'cancelled' AND id = ANY ($1::bigint[])",
                [PostgresArray(matching)]), 4)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'running'", [running]), 1)
        for id in [otherURL, otherQueue] {
            XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'pending'", [id]), 1)
        }

        let onlyRetrying = try courier("jobs", "cancel", "--all", "--state", "retrying", "--yes", "--json")
        XCTAssertEqual((try onlyRetrying.json() as? [String: Any])?["cancelled"] as? Int, 0)
        assertFails(try courier("jobs", "cancel", "--all", "--state", "dead"), code: 2, mentioning: "--state")
        assertFails(try courier("jobs", "cancel", "5", "--queue", "billing"), code: 2, mentioning: "go with --all")
        assertFails(try courier("jobs", "cancel", "5", "--all"), code: 2, mentioning: "not both")
    }
}
