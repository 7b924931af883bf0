import CourierTesting
import Foundation
import Postgres
import XCTest

/// Dates beyond what PostgreSQL or `Int64` microseconds hold: formatting never traps, and the
/// server refuses the value as out of range.
final class TimestampRangeTests: XCTestCase {
    func testFormattingIsTotal() {
        XCTAssertEqual(PostgresTimestamp.format(Date(timeIntervalSince1970: 0)), "1970-01-01T00:00:00.000000Z")
        XCTAssertEqual(PostgresTimestamp.format(Date(timeIntervalSince1970: -0.5)), "1969-12-31T23:59:59.500000Z")
        XCTAssertEqual(PostgresTimestamp.format(Date(timeIntervalSince1970: 1.9999996)), "1970-01-01T00:00:02.000000Z")
        // Year 300000 has more microseconds since 1970 than Int64 holds (this trapped before).
        let year300000 = Date(timeIntervalSince1970: 9_404_918_380_800)
        XCTAssertEqual(PostgresTimestamp.format(year300000), "300000-01-01T00:00:00.000000Z")
        for seconds in [Double.infinity, -Double.infinity, .nan, 1e300, -1e300, Double.greatestFiniteMagnitude] {
            XCTAssertFalse(PostgresTimestamp.format(Date(timeIntervalSince1970: seconds)).isEmpty)
        }
    }

    func testTheServerRefusesAnOutOfRangeDateInsteadOfTheClientTrapping() throws {
        let connection = try PostgresConnection(try TestDatabase.serverURL())
        defer { connection.close() }
        for seconds in [9_404_918_380_800, 1e300, Double.infinity] {
            let date = Date(timeIntervalSince1970: seconds)
            XCTAssertThrowsError(try connection.query("SELECT $1::timestamptz", [date])) { error in
                XCTAssertEqual((error as? PostgresError)?.sqlState?.prefix(2), "22", "\(error)")
            }
        }
        let row = try connection.query("SELECT 'infinity'::timestamptz, '200000-01-01'::timestamptz")[0]
        XCTAssertThrowsError(try row.decode(0, as: Date.self), "Date cannot hold infinity; StoredTime can")
        XCTAssertThrowsError(try row.decode(1, as: Date.self))
    }
}
