import CourierTesting
import Foundation
import XCTest

/// `courier worker --max-connections` (and `COURIER_MAX_CONNECTIONS`), and what the worker says
/// at start about fitting that budget into its open-file limit. None of this needs a database:
/// the worker decides and logs before it connects, then fails to reach the closed port.
final class MaxConnectionsFlagTests: XCTestCase {
    /// A port nothing listens on: the worker gets as far as connecting, then stops.
    private let nowhere = "postgresql://courier@127.0.0.1:1/courier?connect_timeout=2"

    func testAnUnreadableOrZeroBudgetIsAUsageErrorNamingItsSource() throws {
        let cases: [(arguments: [String], environment: [String: String], says: String)] = [
            (["--max-connections", "0"], [:], "--max-connections must be at least 1, got 0"),
            (["--max-connections=-5"], [:], "--max-connections must be at least 1, got -5"),
            ([], ["COURIER_MAX_CONNECTIONS": "lots"], #"COURIER_MAX_CONNECTIONS must be an integer of at least 1, got "lots""#),
        ]
        for (arguments, environment, says) in cases {
            let result = try CourierRunner.run(["worker"] + arguments, databaseURL: nil, environment: environment)
            XCTAssertEqual(result.status, 2, "\(arguments) \(environment): \(result.stderr)")
            XCTAssertEqual(result.stderrLines, ["error: " + says], "\(arguments) \(environment)")
        }
        let help = try CourierRunner.run(["worker", "--help"], databaseURL: nil)
        XCTAssertTrue(help.stdout.contains("--max-connections"), help.stdout)
    }

    /// Runs the worker under `prlimit --nofile=SOFT:HARD` and returns its standard error.
    private func worker(nofile: String, _ arguments: [String] = []) throws -> String {
        let prlimit = "/usr/bin/prlimit"  // util-linux, on every Debian
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "COURIER_DATABASE_URL")
        environment.removeValue(forKey: "COURIER_MAX_CONNECTIONS")
        let result = try runProgram(
            prlimit,
            ["--nofile=\(nofile)", CourierBinary.path, "worker", "--database-url", nowhere, "--log-format", "text"] + arguments,
            environment: environment)
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("cannot connect to PostgreSQL"), result.stderr)
        return result.stderr
    }

    func testASoftLimitBelowTheBudgetIsRaisedWithinTheHardLimit() throws {
        let stderr = try worker(nofile: "1024:8192")
        XCTAssertTrue(
            stderr.contains("info courier.worker: raised the open-file limit from 1024 to 2112 for 2048 receiver connections"),
            stderr)
        let custom = try worker(nofile: "1024:8192", ["--max-connections", "5000"])
        XCTAssertTrue(custom.contains("raised the open-file limit from 1024 to 5064 for 5000 receiver connections"), custom)
    }

    func testAHardLimitBelowTheBudgetShrinksItWithAWarningSayingWhatToDo() throws {
        let stderr = try worker(nofile: "1024:1024")
        XCTAssertTrue(
            stderr.contains(
                "warning courier.worker: the open-file limit (1024, hard limit 1024) holds 960 receiver connections, not the 2048 of --max-connections"),
            stderr)
        XCTAssertTrue(stderr.contains("LimitNOFILE="), stderr)
    }

    func testALimitThatHoldsTheBudgetSaysNothing() throws {
        let stderr = try worker(nofile: "4096:4096")
        XCTAssertFalse(stderr.contains("open-file limit"), stderr)
        let small = try worker(nofile: "1024:1024", ["--max-connections", "500"])
        XCTAssertFalse(small.contains("open-file limit"), small)
    }
}
