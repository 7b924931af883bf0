import CourierTesting
import Foundation
import XCTest

/// `courier destinations` through the real binary against a real database.
final class DestinationsCommandTests: CLITestCase {
    private func json(_ result: CommandResult) throws -> Any {
        XCTAssertEqual(result.status, 0, result.stderr)
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
    }

    func testListShowsWaitingJobsPerHostBusiestFirst() throws {
        for _ in 0..<3 { _ = try insertJob(url: "https://busy.example.com/a") }
        _ = try insertJob(url: "https://QUIET.example.com:8443/b")
        let empty = try courier("destinations", "list", "nowhere.example.com")
        assertFails(empty, code: 3, mentioning: "no destination nowhere.example.com")
        let rows = try XCTUnwrap(try json(try courier("destinations", "list", "--json")) as? [[String: Any]])
        XCTAssertEqual(rows.map { $0["host"] as? String }, ["busy.example.com", "quiet.example.com"])
        XCTAssertEqual((rows[0]["due"] as? NSNumber)?.intValue, 3)
        XCTAssertEqual(rows[0]["breaker"] as? String, "closed")
        XCTAssertEqual((rows[0]["max_in_flight"] as? NSNumber)?.intValue, 200)
        XCTAssertEqual(rows[0]["max_in_flight_is_default"] as? Bool, true)
        let table = try courier("destinations")
        XCTAssertEqual(table.status, 0, table.stderr)
        XCTAssertTrue(table.stdout.contains("busy.example.com"), table.stdout)
        XCTAssertTrue(table.stdout.contains("200 (default)"), table.stdout)
        let cut = try courier("destinations", "list", "--limit", "1")
        XCTAssertTrue(cut.stdout.contains("showing the first 1"), cut.stdout)
        assertFails(try courier("destinations", "list", "--limit", "0"), code: 2, mentioning: "--limit")
    }

    func testSetDisableAndEnable() throws {
        _ = try insertJob(url: "https://hooks.example.com/x")
        let set = try json(try courier(
            "hosts", "set", "https://Hooks.Example.com/anything", "--max-in-flight", "8", "--rate-limit", "2.5",
            "--breaker-threshold", "4", "--breaker-cooldown", "1m", "--on-gone", "dead", "--json")) as? [String: Any]
        XCTAssertEqual(set?["on_gone"] as? String, "dead")
        XCTAssertEqual(set?["host"] as? String, "hooks.example.com")
        XCTAssertEqual((set?["max_in_flight"] as? NSNumber)?.intValue, 8)
        XCTAssertEqual((set?["rate_limit"] as? NSNumber)?.doubleValue, 2.5)
        XCTAssertEqual((set?["breaker_cooldown_seconds"] as? NSNumber)?.doubleValue, 60)
        XCTAssertEqual(
            try count(
                "SELECT count(*) FROM courier.destinations WHERE host = 'hooks.example.com' AND max_in_flight = 8 AND breaker_threshold = 4"
            ), 1)
        let disabled = try courier("destinations", "disable", "hooks.example.com", "--reason", "customer migration")
        XCTAssertEqual(disabled.status, 0, disabled.stderr)
        let row = try XCTUnwrap(
            try json(try courier("destinations", "list", "hooks.example.com", "--json")) as? [[String: Any]]).first
        XCTAssertEqual(row?["disabled"] as? Bool, true)
        XCTAssertEqual(row?["disabled_reason"] as? String, "customer migration")
        let enabled = try json(try courier("destinations", "enable", "hooks.example.com", "--json")) as? [String: Any]
        XCTAssertEqual(enabled?["disabled"] as? Bool, false)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.destinations WHERE disabled_at IS NOT NULL"), 0)
        let reset = try courier("destinations", "set", "hooks.example.com", "--max-in-flight", "default", "--rate-limit", "none")
        XCTAssertEqual(reset.status, 0, reset.stderr)
        XCTAssertEqual(
            try count("SELECT count(*) FROM courier.destinations WHERE max_in_flight IS NULL AND rate_limit IS NULL"), 1)
    }

    func testBadInputIsOneLineAndChangesNothing() throws {
        assertFails(try courier("destinations", "disable", "not a host"), code: 2, mentioning: "is not a host name")
        assertFails(try courier("destinations", "set", "a.example.com", "--max-in-flight", "0"), code: 2, mentioning: "--max-in-flight")
        assertFails(try courier("destinations", "set", "a.example.com", "--rate-limit", "-1"), code: 2, mentioning: "--rate-limit")
        assertFails(try courier("destinations", "set", "a.example.com", "--breaker-cooldown", "0s"), code: 2, mentioning: "--breaker-cooldown")
        assertFails(try courier("destinations", "set", "a.example.com"), code: 2, mentioning: "nothing to change")
        assertFails(try courier("destinations", "set", "a.example.com", "--on-gone", "ignore"), code: 2, mentioning: "--on-gone")
        assertFails(try courier("destinations", "enable", "never.example.com"), code: 3, mentioning: "no destination never.example.com")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.destinations"), 0)
    }

    func testHostsIsStillAcceptedForDestinations() throws {
        let byOldName = try courier("hosts", "list", "--json")
        let byNewName = try courier("destinations", "list", "--json")
        XCTAssertEqual(byOldName.status, 0, byOldName.stderr)
        XCTAssertEqual(byOldName.stdout, byNewName.stdout)
        let help = try courier("hosts", "--help")
        XCTAssertEqual(help.status, 0, help.stderr)
        XCTAssertTrue(help.stdout.contains("courier destinations"), help.stdout)
    }
}
