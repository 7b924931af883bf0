import RetryClient
import XCTest

/// Field names match but for ASCII case, as HTTP says; order and duplicates are kept.
final class HeaderFieldsTests: XCTestCase {
    func testLookupIgnoresASCIICaseOnly() {
        var headers: HeaderFields = ["Content-Type": "application/json", "X-Trace": "a", "x-trace": "b"]
        XCTAssertEqual(headers["content-type"], "application/json")
        XCTAssertEqual(headers["CONTENT-TYPE"], "application/json")
        XCTAssertNil(headers["content-typ"])
        XCTAssertNil(headers["content-typf"])
        XCTAssertEqual(headers.values("X-TRACE"), ["a", "b"])
        // Only ASCII letters fold: these are different names (and no legal header name anyway).
        headers.add("Émoji", "1")
        XCTAssertNil(headers["émoji"])
        XCTAssertEqual(headers["Émoji"], "1")
        // `@` and `` ` `` sit next to the letters in ASCII; they fold to nothing.
        headers.add("a@", "2")
        XCTAssertNil(headers["a`"])
        XCTAssertNil(headers["A`"])
        headers["x-TRACE"] = "c"
        XCTAssertEqual(headers.values("x-trace"), ["c"])
        XCTAssertEqual(headers.pairs.last?.0, "x-TRACE")
        headers["X-Trace"] = nil
        XCTAssertFalse(headers.contains("x-trace"))
        XCTAssertEqual(headers.count, 3)
    }
}
