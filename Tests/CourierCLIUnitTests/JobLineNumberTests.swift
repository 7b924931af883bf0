import Foundation
import XCTest

@testable import CourierCLI

/// How `enqueue --jsonl` tells integers, doubles, booleans and out-of-range numbers apart in
/// what this Foundation's JSON parser returns.
final class JobLineNumberTests: XCTestCase {
    func testNumberClassificationOnThisFoundation() throws {
        func value(_ json: String) throws -> Any {
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data("[\(json)]".utf8)) as? [Any]).first!
        }
        XCTAssertEqual(JobLineReader.classify(try value("0")), .integer(0))
        XCTAssertEqual(JobLineReader.classify(try value("1")), .integer(1))
        XCTAssertEqual(JobLineReader.classify(try value("true")), .boolean)
        XCTAssertEqual(JobLineReader.classify(try value("false")), .boolean)
        XCTAssertEqual(JobLineReader.classify(try value("1.0")), .double(1))
        XCTAssertEqual(JobLineReader.classify(try value("1e3")), .double(1000))
        XCTAssertEqual(JobLineReader.classify(try value("-0")), .integer(0))
        XCTAssertEqual(JobLineReader.classify(try value("2147483648")), .integer(2_147_483_648))
        XCTAssertEqual(JobLineReader.classify(try value("9223372036854775808")), .outOfRange)
        XCTAssertEqual(JobLineReader.classify(try value("123456789012345678901234567890")), .outOfRange)
        XCTAssertEqual(JobLineReader.classify(try value("\"1\"")), .notANumber)
        XCTAssertThrowsError(try JobLineReader.integer(try value("1.5"), "priority", within: -32768...32767))
        XCTAssertThrowsError(try JobLineReader.integer(try value("1e6"), "priority", within: -32768...32767))
        XCTAssertEqual(try JobLineReader.integer(try value("1e3"), "max_attempts", within: 1...1000), 1000)
    }
}
