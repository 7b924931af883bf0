import CourierTesting
import Foundation
import XCTest

/// `courier bench --scenarios scale`: drains on an empty table (a second database of the
/// throwaway cluster) and beside a loaded history, taking turns over three rounds.
final class BenchScaleTests: XCTestCase {
    func testScaleDrainsBothTablesInTurnsAndReportsEveryRoundsRatio() throws {
        let temporary = try benchTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: temporary) }
        let result = try CourierRunner.run(
            ["bench", "--scenarios", "scale", "--history", "2000", "--due", "200", "--json"], databaseURL: nil,
            environment: ["TMPDIR": temporary.path])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        let rows = (try result.json() as? [String: Any])?["scenarios"] as? [[String: Any]] ?? []
        XCTAssertEqual(rows.map { $0["name"] as? String }, ["scale-empty", "scale"], "\(rows)")
        let full = rows.last ?? [:]
        XCTAssertEqual(full["jobs"] as? Int, 200, "\(rows)")
        XCTAssertEqual(full["history_rows"] as? Int, 2000, "\(rows)")
        // Read as numbers whatever their value (Foundation on Linux may hand back 1 as a Bool).
        let ratios = (full["drain_fraction_of_empty_rounds"] as? [NSNumber] ?? []).map(\.doubleValue)
        XCTAssertEqual(ratios.count, 3, "one ratio per round: \(rows)")
        XCTAssertTrue(ratios.allSatisfy { $0 > 0 }, "\(ratios)")
        XCTAssertEqual((full["drain_fraction_of_empty"] as? NSNumber)?.doubleValue, ratios.sorted().dropFirst().first, "the median of the rounds")
        for round in 1...3 {
            XCTAssertTrue(result.stderr.contains("scale: round \(round) of 3"), result.stderr)
        }
    }

    func testScaleRefusesFewerDueJobsThanOneClaimOfAHundred() throws {
        let result = try CourierRunner.run(["bench", "--scenarios", "scale", "--due", "50"], databaseURL: nil)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.stderr.contains("--due must be between 100 and 10000000"), result.stderr)
        XCTAssertFalse(result.stdout.contains("Starting a throwaway"), "nothing started: \(result.stdout)")
    }
}
