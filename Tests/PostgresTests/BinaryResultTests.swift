import CourierTesting
import Foundation
import Postgres
import XCTest

/// Results in PostgreSQL's binary form, read with `PostgresRow.decode`: every type that knows
/// its binary layout gets back exactly what the text form gives, and a value of any other type
/// is refused with the column named, never misread.
final class BinaryResultTests: XCTestCase {
    private var connection: PostgresConnection!

    override func setUpWithError() throws {
        connection = try PostgresConnection(try TestDatabase.serverURL())
    }

    override func tearDown() {
        connection?.close()
    }

    /// The same statement, answered in both forms.
    private func bothForms(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> (
        text: PostgresRow, binary: PostgresRow
    ) {
        let text = try connection.queryCached(sql, parameters)
        let binary = try connection.queryCached(sql, parameters, resultFormat: .binary)
        XCTAssertEqual(text.rowCount, 1)
        XCTAssertEqual(binary.rowCount, 1)
        return (text[0], binary[0])
    }

    func testIntegersOfEveryWidthReadAsInTextAtTheirExtremes() throws {
        let rows = try bothForms(
            """
            SELECT $1::bigint, $2::bigint, 0::bigint, -1::bigint, $3::int, $4::int, -1::int,
                   (-32768)::smallint, 32767::smallint, (-1)::smallint, NULL::bigint
            """, [Int64.min, Int64.max, Int32.min, Int32.max])
        for row in [rows.text, rows.binary] {
            XCTAssertEqual(try row.decode(0, as: Int64.self), Int64.min)
            XCTAssertEqual(try row.decode(1, as: Int64.self), Int64.max)
            XCTAssertEqual(try row.decode(1, as: Int.self), Int.max)
            XCTAssertEqual(try row.decode(2, as: Int.self), 0)
            XCTAssertEqual(try row.decode(3, as: Int64.self), -1)
            XCTAssertEqual(try row.decode(4, as: Int32.self), Int32.min)
            XCTAssertEqual(try row.decode(5, as: Int32.self), Int32.max)
            XCTAssertEqual(try row.decode(5, as: Int.self), Int(Int32.max))
            XCTAssertEqual(try row.decode(6, as: Int.self), -1)
            XCTAssertEqual(try row.decode(7, as: Int16.self), Int16.min)
            XCTAssertEqual(try row.decode(8, as: Int64.self), 32767)
            XCTAssertEqual(try row.decode(9, as: Int32.self), -1)
            XCTAssertNil(try row.decode(10, as: Int64?.self))
            XCTAssertThrowsError(try row.decode(10, as: Int64.self))
            // A value beyond the Swift type's range is refused, not truncated.
            XCTAssertThrowsError(try row.decode(1, as: Int32.self))
            XCTAssertThrowsError(try row.decode(5, as: Int16.self))
        }
    }

    func testTextsBytesBooleansAndFloatsReadAsInText() throws {
        let bytes: [UInt8] = [0, 0x5c, 0x78, 0xff, 0x0a] + Array("{\"a\":1}".utf8)
        let rows = try bothForms(
            """
            SELECT $1::text, ''::text, 'x'::varchar(3), 'ab'::char(3), 'pg_class'::name, $2::bytea, ''::bytea,
                   true, false, 0.1::float8, '-Infinity'::float8, 1.5::float4, '{"k": "v"}'::jsonb::text, NULL::text
            """, ["zürich ✓ 🚀 \u{7f} \\x", bytes])
        for row in [rows.text, rows.binary] {
            XCTAssertEqual(try row.decode(0, as: String.self), "zürich ✓ 🚀 \u{7f} \\x")
            XCTAssertEqual(try row.decode(1, as: String.self), "")
            XCTAssertEqual(try row.decode(2, as: String.self), "x")
            XCTAssertEqual(try row.decode(3, as: String.self), "ab ")
            XCTAssertEqual(try row.decode(4, as: String.self), "pg_class")
            XCTAssertEqual(try row.decode(5, as: [UInt8].self), bytes)
            XCTAssertEqual(try row.decode(5, as: Data.self), Data(bytes))
            XCTAssertEqual(try row.decode(6, as: [UInt8].self), [])
            XCTAssertEqual(try row.decode(7, as: Bool.self), true)
            XCTAssertEqual(try row.decode(8, as: Bool.self), false)
            XCTAssertEqual(try row.decode(9, as: Double.self), 0.1)
            XCTAssertEqual(try row.decode(10, as: Double.self), -.infinity)
            XCTAssertEqual(try row.decode(11, as: Double.self), 1.5)
            XCTAssertEqual(try row.decode(12, as: String.self), #"{"k": "v"}"#)
            XCTAssertNil(try row.decode(13, as: String?.self))
        }
        // In binary the bytea is its bytes, not hex.
        XCTAssertEqual(rows.binary.rawBytes(5), bytes)
    }

    /// A binary value is read only as a Swift type that knows its column type's layout: the
    /// bytes of an int8 are no text, a text's bytes no integer, and a type without a binary
    /// reader (a timestamp here) says so with the column's name instead of guessing.
    func testABinaryValueOfAnotherTypeIsRefusedWithTheColumnNamed() throws {
        let row = try connection.queryCached(
            "SELECT 42::bigint AS n, '42'::text AS t, now() AS at, 1::int AS one, 'abc'::bytea AS b",
            [], resultFormat: .binary)[0]
        func message(_ body: () throws -> Any) -> String {
            do {
                _ = try body()
                return "no error"
            } catch { return "\(error)" }
        }
        let asText = message { try row.decode(0, as: String.self) }
        XCTAssertTrue(asText.contains("column \"n\" (binary, type oid 20, 8 bytes) is not a String"), asText)
        let asNumber = message { try row.decode(1, as: Int.self) }
        XCTAssertTrue(asNumber.contains("column \"t\" (binary, type oid 25, 2 bytes) is not a Int"), asNumber)
        let asDate = message { try row.decode(2, as: Date.self) }
        XCTAssertTrue(asDate.contains("column \"at\" (binary, type oid 1184"), asDate)
        // An int4's 1 is not a boolean, and bytes are not text.
        XCTAssertThrowsError(try row.decode(3, as: Bool.self))
        XCTAssertThrowsError(try row.decode(4, as: String.self))
        XCTAssertThrowsError(try row.decode(0, as: [UInt8].self))
    }

    /// A pipeline answers each statement in the form that statement asked for.
    func testAPipelineMixesTextAndBinaryStatements() throws {
        let results = try connection.pipeline([
            PipelineStatement("SELECT $1::bigint, $2::bytea", [Int64(-7), [UInt8]([1, 2, 255])]),
            PipelineStatement(
                "SELECT $1::bigint, $2::bytea", [Int64(-7), [UInt8]([1, 2, 255])], resultFormat: .binary),
        ])
        XCTAssertEqual(results[0][0].rawBytes(0), Array("-7".utf8))
        XCTAssertEqual(results[0][0].rawBytes(1), Array("\\x0102ff".utf8))
        XCTAssertEqual(results[1][0].rawBytes(0), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf9])
        XCTAssertEqual(results[1][0].rawBytes(1), [1, 2, 255])
        for result in results {
            XCTAssertEqual(try result[0].decode(0, as: Int64.self), -7)
            XCTAssertEqual(try result[0].decode(1, as: [UInt8].self), [1, 2, 255])
        }
    }
}
