import CourierTesting
import Foundation
import XCTest

/// Every drain row of `courier bench` carries the CPU that PostgreSQL spent on it, read from
/// /proc beside the worker's: the figure issue reports compare with.
final class BenchServerCPUTests: XCTestCase {
    func testADrainReportsTheWorkersAndTheDatabasesCPUPerJob() throws {
        let result = try CourierRunner.run(["bench", "--scenarios", "drain", "--jobs", "300", "--json"], databaseURL: nil)
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        let json = try XCTUnwrap(try result.json() as? [String: Any], result.stdout)
        let drain = try XCTUnwrap((json["scenarios"] as? [[String: Any]])?.first { $0["name"] as? String == "drain" }, result.stdout)
        let server = try XCTUnwrap(drain["server_cpu_seconds_per_1000_jobs"] as? Double, "\(drain)")
        let worker = try XCTUnwrap(drain["worker_cpu_seconds_per_1000_jobs"] as? Double, "\(drain)")
        // A delivered job costs PostgreSQL tens to hundreds of microseconds: more than 1 µs and
        // less than 100 ms a job on any machine (a null or a stray 0 fails).
        XCTAssertGreaterThan(server, 0.001, "\(drain)")
        XCTAssertLessThan(server, 100, "\(drain)")
        XCTAssertGreaterThan(worker, 0.001, "\(drain)")
        // The cores' speed before and after, so the figures can be read against the day's machine.
        let machine = try XCTUnwrap(json["machine"] as? [String: Any], result.stdout)
        for key in ["reference_cpu_ms_before", "reference_cpu_ms_after"] {
            let value = try XCTUnwrap(machine[key] as? Double, "\(key) in \(machine)")
            XCTAssertGreaterThan(value, 1, "\(key) in \(machine)")
        }
    }
}
