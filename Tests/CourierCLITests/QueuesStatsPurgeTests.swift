import CourierTesting
import Foundation
import XCTest

final class QueuesStatsPurgeTests: CLITestCase {
    func testQueuesPauseResumeAndSet() throws {
        XCTAssertEqual(try courier("queues", "pause", "billing", "--create").status, 0)
        var queues = try XCTUnwrap(try courier("queues", "list", "--json").json() as? [[String: Any]])
        XCTAssertEqual(queues.first { $0["name"] as? String == "billing" }?["paused"] as? Bool, true)
        XCTAssertEqual(try courier("queues", "resume", "billing").status, 0)

        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)")
        try Data("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n".utf8).write(to: secret)
        defer { try? FileManager.default.removeItem(at: secret) }
        let set = try courier(
            "queues", "set", "billing", "--max-attempts", "4", "--retry-schedule", "10s,1m", "--max-in-flight", "8",
            "--signing-secret-file", secret.path)
        XCTAssertEqual(set.status, 0, set.stderr)
        XCTAssertFalse(set.stdout.contains("MfKQ9r8"))
        queues = try XCTUnwrap(try courier("queues", "list", "--json").json() as? [[String: Any]])
        let billing = try XCTUnwrap(queues.first { $0["name"] as? String == "billing" })
        XCTAssertEqual(billing["paused"] as? Bool, false)
        XCTAssertEqual(billing["max_attempts"] as? Int, 4)
        XCTAssertEqual(billing["retry_schedule_seconds"] as? [Double], [10, 60])
        XCTAssertEqual(billing["max_in_flight"] as? Int, 8)
        XCTAssertEqual(billing["signed"] as? Bool, true)
        XCTAssertFalse(try courier("queues", "list").stdout.contains("whsec_"))

        XCTAssertEqual(try courier("queues", "set", "billing", "--max-attempts", "default").status, 0)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues WHERE name = 'billing' AND max_attempts IS NULL AND max_in_flight = 8"), 1)
        assertFails(try courier("queues", "set", "billing"), code: 2, mentioning: "nothing to change")
        assertFails(try courier("queues", "set", "billing", "--retry-schedule", "5s,later"), code: 2, mentioning: "--retry-schedule")
    }

    func testStatsCountsByQueueAndState() throws {
        for _ in 0..<3 { try insertJob(queue: "billing") }
        try insertJob(state: "running", queue: "billing")
        try insertJob(state: "dead", queue: "billing")
        try insertJob(state: "succeeded", queue: "mail")
        let human = try courier("stats")
        XCTAssertEqual(human.status, 0, human.stderr)
        XCTAssertTrue(human.stdout.contains("billing"))
        let report = try XCTUnwrap(try courier("stats", "--json").json() as? [String: Any])
        let queues = try XCTUnwrap(report["queues"] as? [[String: Any]])
        let billing = try XCTUnwrap(queues.first { $0["queue"] as? String == "billing" })
        XCTAssertEqual(billing["pending"] as? Int, 3)
        XCTAssertEqual(billing["running"] as? Int, 1)
        XCTAssertEqual(billing["dead"] as? Int, 1)
        XCTAssertEqual(billing["dead_last_hour"] as? Int, 1)
        let mail = try XCTUnwrap(queues.first { $0["queue"] as? String == "mail" })
        XCTAssertEqual(mail["succeeded_last_hour"] as? Int, 1)
        for field in ["lag_seconds", "latency_ms_p50", "latency_ms_p95", "latency_ms_p99", "paused", "retrying"] {
            XCTAssertNotNil(billing[field], "missing \(field)")
        }
    }

    func testPurgeDeletesOnlyOldFinishedJobsOfTheState() throws {
        for _ in 0..<12 { try insertJob(state: "succeeded", finishedAgo: 10 * 86_400) }
        try insertJob(state: "succeeded", finishedAgo: 60)
        try insertJob(state: "dead", finishedAgo: 10 * 86_400)
        let result = try courier("purge", "--state", "succeeded", "--older-than", "7d", "--batch-size", "5", "--json",
            "--yes")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual((try result.json() as? [String: Any])?["deleted"] as? Int, 12)
        XCTAssertEqual(try jobCount, 2)
        assertFails(try courier("purge", "--state", "pending", "--older-than", "7d"), code: 2, mentioning: "--state")
        assertFails(try courier("purge", "--state", "dead", "--older-than", "a while"), code: 2, mentioning: "--older-than")
    }
}
