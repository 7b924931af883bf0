import CourierTesting
import Foundation
import XCTest

/// `courier bench --scenarios bodies`: jobs with 1 MiB bodies, each delivered at its first
/// attempt through the worker's body budget, the row carrying the worker's peak memory; and
/// `COURIER_BENCH_WORKER`, which runs another build's worker under the same benchmark.
final class BenchBodiesTests: XCTestCase {
    func testBodiesScenarioDeliversEveryLargeBodyAndReportsTheWorkersMemory() throws {
        let temporary = try benchTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: temporary) }
        let result = try CourierRunner.run(
            ["bench", "--scenarios", "bodies", "--body-jobs", "20", "--json"], databaseURL: nil,
            environment: ["TMPDIR": temporary.path])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        let json = try result.json() as? [String: Any]
        let rows = json?["scenarios"] as? [[String: Any]] ?? []
        let row = rows.first { $0["name"] as? String == "bodies" }
        XCTAssertEqual(row?["jobs"] as? Int, 20, "\(rows)")
        XCTAssertEqual(row?["attempts"] as? Int, 20, "each job delivered at its first attempt: \(rows)")
        XCTAssertEqual(row?["body_bytes"] as? Int, 1_048_576, "\(rows)")
        XCTAssertNotNil(row?["worker_peak_rss_bytes"] as? Int, "\(rows)")
    }

    func testBenchWorkerRunsTheBuildItNames() throws {
        let temporary = try benchTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: temporary) }
        let missing = temporary.appendingPathComponent("no-such-courier").path
        let result = try CourierRunner.run(
            ["bench", "--scenarios", "drain", "--jobs", "10"], databaseURL: nil,
            environment: ["TMPDIR": temporary.path, "COURIER_BENCH_WORKER": missing])
        XCTAssertNotEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertTrue(result.stderr.contains("cannot run \(missing)"), result.stderr)
    }
}
