import CourierBench
import XCTest

/// The benchmark's worker runs with its defaults and the benchmark's flags: `COURIER_`
/// settings of the shell the benchmark runs in must not reach it unseen.
final class BenchWorkerEnvironmentTests: XCTestCase {
    func testTheWorkerGetsTheEnvironmentWithoutCourierSettings() {
        let environment = WorkerProcess.environment([
            "PATH": "/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
            "COURIER_PER_HOST_LIMIT": "400", "COURIER_CONCURRENCY": "800",
            "COURIER_DATABASE_URL": "postgresql://elsewhere/db", "COURIER_BENCH_WORKER": "/opt/courier-b/courier",
            "NOT_COURIER_X": "kept", "courier_lower": "kept",
        ])
        XCTAssertEqual(
            environment,
            ["HOME": "/root", "LANG": "C.UTF-8", "NOT_COURIER_X": "kept", "PATH": "/usr/bin:/bin", "courier_lower": "kept"])
    }

    func testAnEmptyEnvironmentStaysEmpty() {
        XCTAssertEqual(WorkerProcess.environment([:]), [:])
    }
}
