import CourierTesting
import Foundation
import XCTest

/// `courier queues set --keep-*` and `courier queues show`.
final class QueueRetentionCommandTests: CLITestCase {
    func testKeepFlagsSetRetentionAndShowDisplaysIt() throws {
        let set = try courier("queues", "set", "billing", "--create", "--keep-succeeded", "3d", "--keep-dead", "90d")
        XCTAssertEqual(set.status, 0, set.stderr)
        XCTAssertTrue(set.stdout.contains("Retention: succeeded 3d, cancelled default (7d), dead 90d."), set.stdout)
        XCTAssertEqual(
            try count(
                """
                SELECT count(*) FROM courier.queues WHERE name = 'billing' AND keep_succeeded = interval '3 days'
                AND keep_cancelled IS NULL AND keep_dead = interval '90 days'
                """), 1)
        // Other settings are left alone, and the other flags leave retention alone.
        XCTAssertEqual(try courier("queues", "set", "billing", "--max-attempts", "4").status, 0)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues WHERE keep_dead = interval '90 days' AND max_attempts = 4"), 1)

        for _ in 0..<3 { try insertJob(queue: "billing") }
        try insertJob(state: "dead", queue: "billing")
        let human = try courier("queues", "show", "billing")
        XCTAssertEqual(human.status, 0, human.stderr)
        for fragment in ["Keep succeeded", "3d", "default (7d)", "90d", "Jobs pending", "Max attempts"] {
            XCTAssertTrue(human.stdout.contains(fragment), "\(fragment) not in \(human.stdout)")
        }
        let json = try XCTUnwrap(try courier("queues", "show", "billing", "--json").json() as? [String: Any])
        XCTAssertEqual(json["keep_succeeded_seconds"] as? Double, 259_200)
        XCTAssertTrue(json["keep_cancelled_seconds"] is NSNull)
        XCTAssertEqual(json["keep_dead_seconds"] as? Double, 7_776_000)
        XCTAssertEqual(json["max_attempts"] as? Int, 4)
        let jobs = try XCTUnwrap(json["jobs"] as? [String: Any])
        XCTAssertEqual(jobs["pending"] as? Int, 3)
        XCTAssertEqual(jobs["dead"] as? Int, 1)
        XCTAssertNotNil(json["lag_seconds"])

        XCTAssertEqual(try courier("queues", "set", "billing", "--keep-dead", "default", "--keep-cancelled", "0s").status, 0)
        XCTAssertEqual(
            try count("SELECT count(*) FROM courier.queues WHERE keep_dead IS NULL AND keep_cancelled = interval '0'"), 1)
    }

    func testBadRetentionIsOneUsageErrorAndChangesNothing() throws {
        assertFails(try courier("queues", "set", "billing", "--keep-succeeded", "soon"), code: 2, mentioning: "--keep-succeeded")
        assertFails(try courier("queues", "set", "billing", "--keep-dead", "4000d"), code: 2, mentioning: "--keep-dead")
        assertFails(
            try courier("queues", "set", "billing", "--max-attempts", "3", "--keep-cancelled=-1d"), code: 2,
            mentioning: "--keep-cancelled")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues"), 0)
    }

    func testShowOfAnUnknownQueueIsNotFound() throws {
        assertFails(try courier("queues", "show", "nobody"), code: 3, mentioning: #"no queue named "nobody" (courier queues list shows the queues)"#)
        // A queue known only by its jobs is shown.
        try insertJob(state: "succeeded", queue: "mail")
        XCTAssertEqual(try courier("queues", "show", "mail").status, 0)
    }
}
