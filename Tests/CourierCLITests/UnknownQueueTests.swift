import CourierTesting
import Foundation
import XCTest

/// A queue name nobody uses is a typo until `--create` says otherwise: exit code 3, one line
/// naming close matches, nothing created or changed.
final class UnknownQueueTests: CLITestCase {
    func testPauseOfAnUnknownQueueNamesCloseMatchesAndCreatesNothing() throws {
        try insertJob(queue: "billing")
        let typo = try courier("queues", "pause", "bililng")
        assertFails(typo, code: 3, mentioning: #"no queue named "bililng" (did you mean "billing"?)"#)
        XCTAssertTrue(typo.stderr.contains("--create"), typo.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues"), 0)

        let unrelated = try courier("queues", "pause", "webhooks")
        assertFails(unrelated, code: 3, mentioning: "courier queues list")

        let created = try courier("queues", "pause", "webhooks", "--create")
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues WHERE name = 'webhooks' AND paused"), 1)
        XCTAssertEqual(try courier("queues", "resume", "webhooks").status, 0, "a queue with settings is known")
        XCTAssertEqual(try courier("queues", "pause", "billing").status, 0, "a queue with jobs is known")
    }

    func testSetOfAnUnknownQueueNeedsCreate() throws {
        try insertJob(queue: "billing")
        let typo = try courier("queues", "set", "biling", "--max-attempts", "3")
        assertFails(typo, code: 3, mentioning: #"did you mean "billing"?"#)
        XCTAssertTrue(typo.stderr.contains("--create"), typo.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues"), 0)
        let created = try courier("queues", "set", "invoices", "--create", "--max-attempts", "3")
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues WHERE name = 'invoices' AND max_attempts = 3"), 1)
        XCTAssertEqual(try courier("queues", "set", "invoices", "--max-attempts", "4").status, 0)
    }

    func testEveryCommandThatTakesAQueueRefusesAnUnknownOne() throws {
        try insertJob(state: "dead", queue: "billing", finishedAgo: 40 * 86_400)
        try insertJob(queue: "billing")
        let commands: [[String]] = [
            ["jobs", "list", "--queue", "bililng"],
            ["dead", "list", "--queue", "bililng"],
            ["dead", "requeue", "--all", "--queue", "bililng", "--yes"],
            ["jobs", "cancel", "--all", "--queue", "bililng", "--yes"],
            ["purge", "--state", "dead", "--older-than", "1d", "--queue", "bililng", "--yes"],
            ["queues", "resume", "bililng"],
            ["queues", "pause", "bililng"],
            ["queues", "set", "bililng", "--max-attempts", "2"],
        ]
        for arguments in commands {
            let result = try courier(arguments)
            assertFails(result, code: 3, mentioning: #"did you mean "billing"?"#)
        }
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE state = 'dead'"), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE state = 'pending'"), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues"), 0)
        // A queue that has only finished jobs is known too.
        XCTAssertEqual(try courier("dead", "list", "--queue", "billing").status, 0)
    }

    func testEnqueueToANewQueueWorksAndWarnsOnlyOnALikelyTypo() throws {
        try insertJob(queue: "billing")
        let fresh = try courier("enqueue", "--url", "https://example.com/x", "--queue", "webhooks")
        XCTAssertEqual(fresh.status, 0, fresh.stderr)
        XCTAssertEqual(fresh.stderr, "", "a new queue unlike any other is what the producer meant")
        let typo = try courier("enqueue", "--url", "https://example.com/x", "--queue", "bililng")
        XCTAssertEqual(typo.status, 0, typo.stderr)
        XCTAssertNotNil(Int64(typo.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), typo.stdout)
        XCTAssertEqual(typo.stderrLines.count, 1, typo.stderr)
        XCTAssertTrue(typo.stderr.hasPrefix(#"warning: queue "bililng" is new (did you mean "billing"?)"#), typo.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE queue = 'bililng'"), 1)
        let again = try courier("enqueue", "--url", "https://example.com/x", "--queue", "bililng")
        XCTAssertEqual(again.stderr, "", "once the queue has jobs it is known")
    }
}

extension CLITestCase {
    func courier(_ arguments: [String]) throws -> CommandResult {
        try CourierRunner.run(arguments, databaseURL: databaseURL)
    }
}
