import Foundation
import Postgres
import XCTest

/// The text of array parameters, with no server: each element type writes itself into the
/// literal, and the result is what PostgreSQL's array input reads back element for element.
final class ArrayLiteralTests: XCTestCase {
    /// The literal of `elements`, a typed array as callers pass it (an array literal written
    /// in place would choose the boxed initializer).
    private func literal<Element: PostgresEncodable>(_ elements: [Element]) -> String {
        guard case .text(let text) = PostgresArray(elements).postgresValue else { return "" }
        return text
    }

    func testIntegersAreWrittenAsPlainDigits() {
        XCTAssertEqual(literal([0, 7, -7, 1_234_567_890]), "{0,7,-7,1234567890}")
        XCTAssertEqual(literal([Int64.max, Int64.min]), "{9223372036854775807,-9223372036854775808}")
        XCTAssertEqual(literal([Int32.min, 0, Int32.max]), "{-2147483648,0,2147483647}")
        XCTAssertEqual(literal([Int]()), "{}")
        for _ in 0..<1_000 {
            let value = Int64.random(in: .min ... .max)
            XCTAssertEqual(literal([value]), "{\(value)}")
        }
    }

    func testOptionalsBoolsAndTextsAreWrittenAsBefore() {
        XCTAssertEqual(literal([Int?.none, 5, nil]), "{NULL,5,NULL}")
        XCTAssertEqual(literal([true, false]), "{t,f}")
        XCTAssertEqual(literal([1.5, Double?.none]), #"{"1.5",NULL}"#)
        XCTAssertEqual(literal(["a b", #"say "hi"\"#, "NULL", ""]), #"{"a b","say \"hi\"\\","NULL",""}"#)
        XCTAssertEqual(literal([String?.none, "x"]), #"{NULL,"x"}"#)
        // The boxed form still writes the same text.
        guard case .text(let boxed) = PostgresArray([5 as (any PostgresEncodable)?, nil, "x"]).postgresValue else {
            return XCTFail("not text")
        }
        XCTAssertEqual(boxed, #"{"5",NULL,"x"}"#)
    }

    func testDatesAreWrittenUnquotedAsTheFormatterWritesThem() {
        let dates = [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_000_000.123456)]
        XCTAssertEqual(literal(dates), "{1970-01-01T00:00:00.000000Z,\(PostgresTimestamp.format(dates[1]))}")
        XCTAssertEqual(PostgresTimestamp.format(dates[1]), "2026-11-18T11:06:40.123456Z")
        XCTAssertEqual(literal([Date?.none]), "{NULL}")
    }
}
