import CourierTesting
import Foundation
import Postgres
import XCTest

/// Dates beyond what PostgreSQL or `Int64` microseconds hold: the server refuses the value as
/// out of range instead of the client trapping (formatting alone: PostgresUnitTests).
final class TimestampRangeTests: XCTestCase {
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
