import CourierTesting
import Foundation
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// `courier bench --scenarios tls`: every job is delivered over HTTPS to a sink whose
/// certificate a CA made for the run signed, which the worker trusts only through
/// `--tls-ca-file` (a job that failed its certificate check would be dead, and the scenario
/// would fail); the row carries the worker's and PostgreSQL's CPU, and nothing is left in the
/// temporary directory (the certificates, the keys, the worker's log).
final class BenchTLSTests: XCTestCase {
    func testTLSScenarioDeliversEveryJobOverHTTPSAndLeavesNoFile() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                return XCTFail("openssl is missing (apt-get install openssl)")
            }
            throw XCTSkip("openssl is not installed (apt-get install openssl); the tls scenario is not run")
        }
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        // As root the throwaway cluster belongs to `postgres`, which must reach its directory.
        chmod(temporary.path, 0o755)
        let result = try CourierRunner.run(
            ["bench", "--scenarios", "tls", "--jobs", "300", "--json"], databaseURL: nil,
            environment: ["TMPDIR": temporary.path])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        let json = try result.json() as? [String: Any]
        let rows = json?["scenarios"] as? [[String: Any]] ?? []
        let row = rows.first { $0["name"] as? String == "tls" }
        XCTAssertEqual(row?["jobs"] as? Int, 300, "\(rows)")
        XCTAssertEqual(row?["attempts"] as? Int, 300, "each job delivered at its first attempt: \(rows)")
        XCTAssertNotNil(row?["worker_cpu_seconds_per_1000_jobs"] as? Double, "\(rows)")
        XCTAssertNotNil(row?["server_cpu_seconds_per_1000_jobs"] as? Double, "\(rows)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: temporary.path), [], "the benchmark left files")
    }
}
