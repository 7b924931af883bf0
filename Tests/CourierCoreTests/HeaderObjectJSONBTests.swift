import CourierTesting
import Foundation
import Postgres
import XCTest

@testable import CourierCore

/// The claim's header reader against what a real server sends: jsonb's own text output of
/// header objects at the edge (the reader's rules alone are in CourierCoreUnitTests'
/// HeaderObjectTests, whose reference and comparison are repeated here).
final class HeaderObjectJSONBTests: XCTestCase {
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

    func testTheDecoderTakesWhatJSONBSendsAndKeepsTheOldErrors() throws {
        // The claim reads jsonb's own text output: check that form, from a real server, for
        // values at the edge (quotes, backslashes, control characters, non-ASCII, emoji).
        let connection = try PostgresConnection(try TestDatabase.serverURL())
        defer { connection.close() }
        let objects: [[String: String]] = [
            [:], ["Content-Type": "application/json"],
            ["X-Q": "\"quoted\" \\ back", "X-Ctl": "\u{1}\u{1f}\t\n", "X-U": "é中😀\u{7f}", "": "empty key"],
            ["Authorization": "Bearer abc", "authorization": "lower", "X-Long": String(repeating: "v", count: 5000)],
        ]
        for object in objects {
            let json = String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
            let stored: String = try connection.query("SELECT $1::jsonb::text", [json])[0].decode(0)
            XCTAssertNotNil(HeaderObject.parse(stored), stored)
            assertSame(stored)
            let decoded = try JobStore.decodeHeaders(stored)
            XCTAssertEqual(decoded.map(\.0), object.keys.sorted(), stored)
            XCTAssertEqual(decoded.map(\.1), object.keys.sorted().map { object[$0]! }, stored)
        }
        for (text, message) in [
            ("[]", "headers must be a JSON object of strings"), (#"{"a": 1}"#, "headers: the value of a is not a string"),
        ] {
            XCTAssertThrowsError(try JobStore.decodeHeaders(text)) { XCTAssertTrue("\($0)".contains(message), "\($0)") }
        }
    }
}
