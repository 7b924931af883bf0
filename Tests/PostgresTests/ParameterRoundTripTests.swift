import CourierTesting
import Foundation
import Postgres
import XCTest

final class ParameterRoundTripTests: XCTestCase {
    private var connection: PostgresConnection!

    override func setUpWithError() throws {
        connection = try PostgresConnection(try TestDatabase.serverURL())
    }

    override func tearDown() {
        connection?.close()
    }

    func testBinaryResultsCarryByteaAsItsBytes() throws {
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) } + [0, 0x5c, 0x78]
        let sql = "SELECT $1::bytea, NULL::bytea, ''::bytea"
        let binary = try connection.queryCached(sql, [bytes], resultFormat: .binary)[0]
        XCTAssertEqual(binary.rawBytes(0), bytes)
        XCTAssertNil(binary.rawBytes(1))
        XCTAssertEqual(binary.rawBytes(2), [])
        XCTAssertNil(binary.rawBytes(9), "no such column")
        // The same prepared statement still answers in text form when asked so.
        let text = try connection.queryCached(sql, [bytes])[0]
        XCTAssertEqual(try text.decode(0, as: [UInt8].self), bytes)
        XCTAssertEqual(text.rawBytes(0)?.prefix(2), Array("\\x".utf8)[...])
    }

    /// Binary array parameters as the server reads them: every element type, NULLs, the
    /// extremes of each type and an empty array, read back as the server's text.
    func testBinaryArraysReachTheServerElementForElement() throws {
        let row = try connection.query(
            "SELECT $1::bigint[]::text, $2::int[]::text, $3::float8[]::text, $4::boolean[]::text, $5::bigint[]::text, cardinality($5::bigint[])",
            [
                PostgresBinaryArray([Int64.min, 0, Int64.max]),
                PostgresBinaryArray([Int32.min, nil, Int32.max]),
                PostgresBinaryArray([0.1, -0.0, .infinity, -.infinity, .nan, nil]),
                PostgresBinaryArray([true, false]),
                PostgresBinaryArray([Int64]()),
            ])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "{-9223372036854775808,0,9223372036854775807}")
        XCTAssertEqual(try row.decode(1, as: String.self), "{-2147483648,NULL,2147483647}")
        XCTAssertEqual(try row.decode(2, as: String.self), "{0.1,-0,Infinity,-Infinity,NaN,NULL}")
        XCTAssertEqual(try row.decode(3, as: String.self), "{t,f}")
        XCTAssertEqual(try row.decode(4, as: String.self), "{}")
        XCTAssertEqual(try row.decode(5, as: Int.self), 0)
    }

    /// An array whose element type is not the parameter's is refused by the server with one
    /// clear error, and the connection goes on.
    func testABinaryArrayOfTheWrongElementTypeIsRefused() throws {
        XCTAssertThrowsError(try connection.query("SELECT $1::int[]", [PostgresBinaryArray([Int64(1)])])) { error in
            XCTAssertTrue("\(error)".contains("binary data has array element type 20 (bigint) instead of expected 23 (integer)"), "\(error)")
        }
        XCTAssertEqual(try connection.query("SELECT 1")[0].decode(0, as: Int.self), 1)
    }

    func testNullBindsAndDecodesAsNil() throws {
        let row = try connection.query("SELECT $1::text, $2::bigint", [String?.none, Int?.none])[0]
        XCTAssertNil(try row.decode(0, as: String?.self))
        XCTAssertNil(try row.decode(1, as: Int?.self))
        XCTAssertTrue(row.isNull(0))
    }

    func testNullWhereAValueIsExpectedThrowsADecodingError() throws {
        let row = try connection.query("SELECT NULL::int AS missing")[0]
        XCTAssertThrowsError(try row.decode(0, as: Int.self)) { error in
            let pgError = error as? PostgresError
            XCTAssertEqual(pgError?.kind, .decoding)
            XCTAssertTrue(pgError?.message.contains("missing") == true, "\(error)")
        }
    }

    func testTypeMismatchThrowsADecodingError() throws {
        let row = try connection.query("SELECT 'hello'::text AS greeting, 2147483648::bigint AS big")[0]
        XCTAssertThrowsError(try row.decode("greeting", as: Int.self)) { error in
            XCTAssertEqual((error as? PostgresError)?.kind, .decoding)
            XCTAssertEqual((error as? PostgresError)?.message, #"column "greeting" value "hello" is not a Int"#)
        }
        XCTAssertThrowsError(try row.decode(1, as: Int32.self)) { error in
            XCTAssertEqual((error as? PostgresError)?.message, #"column "big" value "2147483648" is not a Int32"#)
        }
        XCTAssertThrowsError(try row.decode(2, as: Int.self)) { error in
            XCTAssertEqual((error as? PostgresError)?.kind, .usage)
            XCTAssertEqual((error as? PostgresError)?.message, "column 2 out of range (2 columns)")
        }
    }

    func testIntegersBoolsAndTimestampsDecodeAtTheirEdges() throws {
        let row = try connection.query(
            """
            SELECT $1::bigint, $2::bigint, (-2147483648)::int, 32767::smallint, true, false,
                   '2026-11-22 20:30:00.123456+00'::timestamptz, '0001-01-01 00:00:00+00'::timestamptz
            """, [Int64.min, Int64.max])[0]
        XCTAssertEqual(try row.decode(0, as: Int64.self), Int64.min)
        XCTAssertEqual(try row.decode(1, as: Int.self), Int.max)
        XCTAssertEqual(try row.decode(2, as: Int32.self), Int32.min)
        XCTAssertEqual(try row.decode(3, as: Int16.self), 32767)
        XCTAssertEqual(try row.decode(4, as: Bool.self), true)
        XCTAssertEqual(try row.decode(5, as: Bool.self), false)
        XCTAssertEqual(try row.decode(6, as: Date.self).timeIntervalSince1970, 1_795_379_400.123456, accuracy: 1e-6)
        XCTAssertEqual(try row.decode(7, as: Date.self).timeIntervalSince1970, -62_135_596_800)
    }

    func testEmptyStringIsNotNull() throws {
        let row = try connection.query("SELECT $1::text, $1::text IS NULL", [""])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "")
        XCTAssertEqual(try row.decode(1, as: Bool.self), false)
    }

    func testUnicodeRoundTrips() throws {
        let text = "Grüße, 世界 🚀 \u{200B}é"
        let row = try connection.query("SELECT $1::text, length($1::text)", [text])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), text)
        XCTAssertEqual(try row.decode(1, as: Int.self), text.unicodeScalars.count)
    }

    func testByteaWithZeroBytesRoundTrips() throws {
        let bytes: [UInt8] = [0, 1, 0, 255, 0, 10, 13, 0]
        let row = try connection.query("SELECT $1::bytea, octet_length($1::bytea)", [bytes])[0]
        XCTAssertEqual(try row.decode(0, as: [UInt8].self), bytes)
        XCTAssertEqual(try row.decode(1, as: Int.self), bytes.count)
        XCTAssertEqual(try row.decode(0, as: Data.self), Data(bytes))
    }

    func testByteaOfEveryByteValueDecodesFromTheServersHexInBothCases() throws {
        let bytes = (0...255).map { UInt8($0) }
        let row = try connection.query("SELECT $1::bytea, upper(encode($1::bytea, 'hex'))", [bytes])[0]
        XCTAssertEqual(try row.decode(0, as: [UInt8].self), bytes)
        XCTAssertEqual(try row.decode(0, as: Data.self), Data(bytes))
        XCTAssertEqual([UInt8].decode(postgresText: "\\x" + (try row.decode(1, as: String.self))), bytes)
        XCTAssertEqual([UInt8].decode(postgresText: "\\x"), [])
        for bad in ["", "\\", "x00", "\\x0", "\\x0g", "\\xg0", "\\x 0", "\\x00\u{e9}", "\\X00"] {
            XCTAssertNil([UInt8].decode(postgresText: bad), bad)
        }
        // A value the server sends that is not hex (a text column read as bytea) is an error
        // naming the column, never a wrong value.
        XCTAssertThrowsError(try connection.query("SELECT 'abc'::text AS t")[0].decode(0, as: [UInt8].self)) { error in
            XCTAssertEqual((error as? PostgresError)?.kind, .decoding)
            XCTAssertTrue("\(error)".contains("\"t\""), "\(error)")
        }
    }

    func testOneMebibyteValuesRoundTrip() throws {
        let text = String(repeating: "abcdefgh", count: 131_072)
        let bytes = (0..<1_048_576).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let row = try connection.query("SELECT $1::text, $2::bytea", [text, bytes])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), text)
        XCTAssertEqual(try row.decode(1, as: [UInt8].self), bytes)
    }

    func testTimestampsWithTimeZonesRoundTrip() throws {
        let date = Date(timeIntervalSince1970: 1_795_000_000.123456)
        let row = try connection.query(
            "SELECT $1::timestamptz, '2026-11-22 12:00:00+05:30'::timestamptz, '1999-12-31 23:59:59.5-08'::timestamptz",
            [date])[0]
        XCTAssertEqual(try row.decode(0, as: Date.self).timeIntervalSince1970, date.timeIntervalSince1970, accuracy: 1e-6)
        XCTAssertEqual(try row.decode(1, as: Date.self).timeIntervalSince1970, 1_795_329_000, accuracy: 1e-6)
        XCTAssertEqual(try row.decode(2, as: Date.self).timeIntervalSince1970, 946_713_599.5, accuracy: 1e-6)
    }

    func testLargeAndSmallIntegersRoundTrip() throws {
        let row = try connection.query(
            "SELECT $1::bigint, $2::bigint, $3::int, $4::smallint, $5::bool, $6::float8",
            [Int64.max, Int64.min, Int32.min, Int16.max, true, 0.1])[0]
        XCTAssertEqual(try row.decode(0, as: Int64.self), Int64.max)
        XCTAssertEqual(try row.decode(1, as: Int.self), Int.min)
        XCTAssertEqual(try row.decode(2, as: Int32.self), Int32.min)
        XCTAssertEqual(try row.decode(3, as: Int16.self), Int16.max)
        XCTAssertEqual(try row.decode(4, as: Bool.self), true)
        XCTAssertEqual(try row.decode(5, as: Double.self), 0.1)
    }

    func testJSONIsSentAndReadAsText() throws {
        let row = try connection.query("SELECT $1::jsonb -> 'a'", [PostgresJSON(#"{"a": [1, "two"]}"#)])[0]
        XCTAssertEqual(try row.decode(0, as: PostgresJSON.self), PostgresJSON(#"[1, "two"]"#))
    }

    func testPreparedStatementsRunWithNewParameters() throws {
        try connection.prepare(name: "add", sql: "SELECT $1::int + $2::int")
        XCTAssertEqual(try connection.queryPrepared(name: "add", [1, 2])[0].decode(0, as: Int.self), 3)
        XCTAssertEqual(try connection.queryPrepared(name: "add", [40, 2])[0].decode(0, as: Int.self), 42)
        XCTAssertEqual(try connection.queryCached("SELECT $1::int * 2", [21])[0].decode(0, as: Int.self), 42)
        XCTAssertEqual(try connection.queryCached("SELECT $1::int * 2", [5])[0].decode(0, as: Int.self), 10)
    }

    func testTransactionCommitsOnReturnAndRollsBackOnThrow() throws {
        try connection.simpleQuery("CREATE TEMP TABLE t (v int)")
        try connection.transaction { try $0.query("INSERT INTO t VALUES ($1)", [1]) }
        struct Boom: Error {}
        XCTAssertThrowsError(
            try connection.transaction { conn in
                try conn.query("INSERT INTO t VALUES ($1)", [2])
                throw Boom()
            })
        let values = try connection.query("SELECT v FROM t ORDER BY v").rows.map { try $0.decode(0, as: Int.self) }
        XCTAssertEqual(values, [1])
    }

    func testCopyInLoadsRows() throws {
        try connection.simpleQuery("CREATE TEMP TABLE c (a int, b text)")
        let chunks: [[UInt8]] = [Array("1\tone\n2\t".utf8), Array("two\n3\t\\N\n".utf8)]
        XCTAssertEqual(try connection.copyIn("COPY c (a, b) FROM STDIN", chunks: chunks), 3)
        XCTAssertEqual(try connection.query("SELECT count(*), count(b) FROM c")[0].decode(1, as: Int.self), 2)
    }
}
