import Foundation
import Postgres
import XCTest

/// Values read from the bytes libpq holds decode exactly as from their text, with no server.
final class ValueDecodingTests: XCTestCase {
    private func fromBytes<T: PostgresDecodable>(_ text: String, as type: T.Type) -> T? {
        var text = text
        return text.withUTF8 { T.decode(postgresBytes: $0) }
    }

    func testIntegersDecodeFromBytesAsFromText() {
        let edges = [
            "", "-", "+", "0", "-0", "+5", "42", "-42", "007", "12a", " 1", "1 ", "1.0", "1e3", "٣",
            "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
            "2147483647", "2147483648", "-2147483648", "-2147483649", "32767", "32768", "-32768", "-32769",
            "99999999999999999999999",
        ]
        let random = (0..<2_000).map { _ in String(Int64.random(in: .min ... .max)) }
        for text in edges + random {
            XCTAssertEqual(fromBytes(text, as: Int.self), Int(text), text)
            XCTAssertEqual(fromBytes(text, as: Int64.self), Int64(text), text)
            XCTAssertEqual(fromBytes(text, as: Int32.self), Int32(text), text)
            XCTAssertEqual(fromBytes(text, as: Int16.self), Int16(text), text)
        }
    }

    func testBoolsAndTimestampsDecodeFromBytesAsFromText() {
        for text in ["t", "f", "true", "false", "", "x", "T", "tt"] {
            XCTAssertEqual(fromBytes(text, as: Bool.self), Bool.decode(postgresText: text), text)
        }
        for text in ["2026-11-22 20:30:00.123456+00", "2026-11-22 20:30:00+05:30", "1969-12-31 23:59:59.5+00", "nope", ""] {
            XCTAssertEqual(fromBytes(text, as: Date.self), PostgresTimestamp.parse(text), text)
        }
        XCTAssertEqual(fromBytes("2026-11-22 20:30:00.5+00", as: Date.self)?.timeIntervalSince1970, 1_795_379_400.5)
    }
}
