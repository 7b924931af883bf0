import CourierBench
import CourierTesting
import Foundation
import Postgres
import XCTest

/// The server CPU `courier bench` reports leaves out the server process of its own connection,
/// whose polls for the end of a drain no user's worker pays for.
final class BenchServerCPUObserverTests: CLITestCase {
    func testTheObserversServerProcessIsNotCounted() throws {
        let directory: String = try connection.query("SELECT current_setting('data_directory')")[0].decode(0)
        let observer: Int32 = try connection.query("SELECT pg_backend_pid()")[0].decode(0)
        let all = try XCTUnwrap(ServerCPU(dataDirectory: directory), "data directory \(directory) not readable")
        let others = try XCTUnwrap(ServerCPU(dataDirectory: directory, observer: observer))
        let allBefore = try XCTUnwrap(all.seconds), othersBefore = try XCTUnwrap(others.seconds)
        // About half a second of CPU in the observer's own server process.
        _ = try connection.query("SELECT count(*) FROM generate_series(1, 15000000)")
        let allSpent = try XCTUnwrap(all.seconds) - allBefore
        let othersSpent = try XCTUnwrap(others.seconds) - othersBefore
        XCTAssertGreaterThan(allSpent, 0.2, "the query's CPU is counted without an observer")
        XCTAssertLessThan(othersSpent, allSpent - 0.15, "all \(allSpent) s, without the observer \(othersSpent) s")
    }
}
