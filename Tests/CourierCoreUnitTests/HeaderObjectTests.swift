import Foundation
import XCTest

@testable import CourierCore

/// The claim's header reader must decode exactly what `JSONSerialization` decodes, and hand
/// everything else to it.
final class HeaderObjectTests: XCTestCase {
    /// The slow path, as the claim used it before: the reference.
    private func reference(_ text: String) -> [(String, String)]? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return nil }
        var pairs: [(String, String)] = []
        for (key, value) in object {
            guard let value = value as? String else { return nil }
            pairs.append((key, value))
        }
        return pairs.sorted { $0.0 < $1.0 }
    }

    private func assertSame(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        guard let fast = HeaderObject.parse(text) else {
            return XCTFail("not taken: \(text.debugDescription)", file: file, line: line)
        }
        let expected = reference(text)
        XCTAssertNotNil(expected, "the reference refuses \(text.debugDescription)", file: file, line: line)
        let sorted = fast.sorted { $0.0 < $1.0 }
        XCTAssertEqual(sorted.map(\.0), expected?.map(\.0), text.debugDescription, file: file, line: line)
        XCTAssertEqual(sorted.map(\.1), expected?.map(\.1), text.debugDescription, file: file, line: line)
        // Byte for byte, not only canonically equal.
        XCTAssertEqual(
            sorted.map { Array($0.0.utf8) + [0] + Array($0.1.utf8) }, expected?.map { Array($0.0.utf8) + [0] + Array($0.1.utf8) },
            text.debugDescription, file: file, line: line)
    }

    func testObjectsOfStringsDecodeAsFoundationDecodesThem() {
        let texts = [
            "{}", " { } ", #"{"Content-Type": "application/json"}"#,
            #"{"a":"1","b":"","c":"three words"}"#,
            "{\n\t\"X-Tab\" :\r\n \"v\" }\n",
            #"{"q": "say \"hi\"", "back": "a\\b", "slash": "a\/b"}"#,
            #"{"ctl": "\b\f\n\r\t"}"#,
            #"{"u": "\u00e9\u4e2d\u0041", "upper": "\u00C9"}"#,
            #"{"pair": "\ud83d\ude00", "raw": "😀 é 中"}"#,
            #"{"mixed": "x\u0022y\\\"z", "end": "\\"}"#,
        ]
        for text in texts { assertSame(text) }
    }

    func testAnythingElseIsLeftToTheSlowPath() {
        let texts = [
            "", "null", "[]", #""x""#, "1", "{", "}", #"{"a"}"#, #"{"a":}"#, #"{"a":"b",}"#, #"{"a":"b""#,
            #"{"a":1}"#, #"{"a":true}"#, #"{"a":null}"#, #"{"a":{"b":"c"}}"#, #"{"a":["b"]}"#,
            #"{"a":"b"} x"#, #"{"a":"b"}{}"#, #"{a:"b"}"#, #"{'a':'b'}"#,
            #"{"a":"b","a":"c"}"#,  // a repeated key
            #"{"a":"\x"}"#, #"{"a":"\u12"}"#, #"{"a":"\u12g4"}"#,
            #"{"a":"\ud83d"}"#, #"{"a":"\ude00"}"#, #"{"a":"\ud83d\u0041"}"#,  // lone surrogates
            "{\"a\":\"line\nbreak\"}",  // a raw control character
        ]
        for text in texts {
            XCTAssertNil(HeaderObject.parse(text), text.debugDescription)
        }
    }
}
