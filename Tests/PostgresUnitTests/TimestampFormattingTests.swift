import Foundation
import Postgres
import XCTest

/// How timestamps are written for and read from the server, with no server: formatting never
/// traps, and the parser reads back what the formatter wrote.
final class TimestampFormattingTests: XCTestCase {
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

    func testTimestampFormatterAndParserAgree() {
        for seconds in [0.0, -1.5, 1_000_000_000.000001, 4_102_444_800.999999, -2_208_988_800] {
            let date = Date(timeIntervalSince1970: seconds)
            let parsed = PostgresTimestamp.parse(PostgresTimestamp.format(date).replacingOccurrences(of: "T", with: " "))
            XCTAssertEqual(parsed?.timeIntervalSince1970 ?? .nan, seconds, accuracy: 1e-6, "\(seconds)")
        }
    }

    /// Dates of years 0 to 9999 are written by a fast path; its text reads back as the same
    /// microsecond and keeps the fixed width of 27 characters.
    func testTheFourDigitYearsReadBackToTheMicrosecond() {
        XCTAssertEqual(PostgresTimestamp.format(Date(timeIntervalSince1970: 253_402_300_799.5)), "9999-12-31T23:59:59.500000Z")
        XCTAssertEqual(PostgresTimestamp.format(Date(timeIntervalSince1970: -62_167_219_200)), "0000-01-01T00:00:00.000000Z")
        XCTAssertEqual(PostgresTimestamp.format(Date(timeIntervalSince1970: 253_402_300_800)), "10000-01-01T00:00:00.000000Z")
        for _ in 0..<2_000 {
            let micros = Int64.random(in: -62_167_219_200_000_000...253_402_300_799_999_999)
            let date = Date(timeIntervalSince1970: Double(micros) / 1_000_000)
            let text = PostgresTimestamp.format(date)
            XCTAssertEqual(text.utf8.count, 27, text)
            let parsed = PostgresTimestamp.parse(text.replacingOccurrences(of: "T", with: " "))
            XCTAssertEqual(
                parsed?.timeIntervalSince1970 ?? .nan, date.timeIntervalSince1970,
                accuracy: max(2e-6, date.timeIntervalSince1970.magnitude.ulp * 2), text)
        }
    }

    /// Microseconds since 1970 round as the text does: the time a statement rebuilds from them
    /// is the one the text would have named.
    func testMicrosecondsRoundAsTheTextDoes() {
        XCTAssertEqual(PostgresTimestamp.microseconds(since1970: Date(timeIntervalSince1970: 0)), 0)
        XCTAssertEqual(PostgresTimestamp.microseconds(since1970: Date(timeIntervalSince1970: -0.5)), -500_000)
        XCTAssertEqual(PostgresTimestamp.microseconds(since1970: Date(timeIntervalSince1970: 1.9999996)), 2_000_000)
        XCTAssertEqual(
            PostgresTimestamp.microseconds(since1970: Date(timeIntervalSince1970: 1_795_000_000.123456)),
            1_795_000_000_123_456)
        for seconds in [Double.infinity, -Double.infinity, .nan, 1e300, -1e300] {
            let micros = PostgresTimestamp.microseconds(since1970: Date(timeIntervalSince1970: seconds))
            XCTAssertEqual(micros.magnitude, 9_000_000_000_000_000_000, "\(seconds)")
        }
        for _ in 0..<2_000 {
            let date = Date(timeIntervalSince1970: Double.random(in: -62_167_219_200...253_402_300_799))
            let micros = PostgresTimestamp.microseconds(since1970: date)
            let again = Date(timeIntervalSince1970: Double(micros / 1_000_000) + Double(micros % 1_000_000) / 1_000_000)
            XCTAssertEqual(PostgresTimestamp.format(again), PostgresTimestamp.format(date), "\(date.timeIntervalSince1970)")
        }
    }
}
