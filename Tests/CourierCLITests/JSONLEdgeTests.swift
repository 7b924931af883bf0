@testable import CourierCLI
import CourierTesting
import Foundation
import Postgres
import XCTest

/// `enqueue --jsonl` with hostile lines: each is a line-numbered problem, `--skip-invalid` skips
/// it, and the valid lines of the same file go in.
final class JSONLEdgeTests: CLITestCase {
    private func line(_ fields: String) -> [UInt8] {
        Array(#"{"url": "https://example.com/ok", "#.utf8) + Array(fields.utf8) + [0x7D]
    }

    func testHostileLinesAreLineNumberedAndSkippedWhileValidLinesGoIn() throws {
        var lines: [(bad: String?, bytes: [UInt8])] = [
            (nil, line(#""priority": 0"#)),
            ("NUL byte", Array(#"{"url": "https://example.com/a"#.utf8) + [0] + Array(#""}"#.utf8)),
            ("url contains a NUL character", Array(#"{"url": "https://example.com/\u0000"}"#.utf8)),
            ("a header name", Array(#"{"url": "https://e.com", "headers": {"X\u0000": "v"}}"#.utf8)),
            ("not valid UTF-8", Array(#"{"url": "https://example.com/"#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8)),
            ("a number is out of range", line(#""priority": 1e400"#)),
            ("priority must be between -32768 and 32767", line(#""priority": 9223372036854775808"#)),
            ("priority must be between -32768 and 32767", line(#""priority": 123456789012345678901234567890"#)),
            ("priority must be between -32768 and 32767", line(#""priority": 40000"#)),
            ("max_attempts must be between 1 and 1000", line(#""max_attempts": 2147483648"#)),
            ("nested deeper than",
             line(#""payload": "# + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000))),
            ("out of range", line(#""delay": 1e300"#)),
            ("out of range", line(#""retry_schedule": [5, 1e300]"#)),
            ("out of range", line(#""run_at": "9999-12-31T23:59:59Z", "delay": "100000000000000s""#)),
            (nil, line(#""max_attempts": 1"#)),
            ("longer than", line(#""body": ""# + String(repeating: "x", count: 5 << 20) + #"""#)),
            (nil, line(#""payload": {"deep": [[[[1]]]], "n": 1e308}, "idempotency_key": "last""#)),
        ]
        lines.append(("run_at", line(#""run_at": "300000-01-01T00:00:00Z""#)))
        var input: [UInt8] = []
        for entry in lines { input += entry.bytes + [0x0A] }
        let badLines = lines.enumerated().filter { $0.element.bad != nil }.map { $0.offset + 1 }
        let goodCount = lines.count - badLines.count

        let strict = try courier("enqueue", "--jsonl", "-", stdin: Data(input))
        XCTAssertEqual(strict.status, 2, strict.stderr)
        for (index, entry) in lines.enumerated() {
            guard let reason = entry.bad else { continue }
            XCTAssertTrue(strict.stderr.contains("line \(index + 1): "), "line \(index + 1) not named")
            let named = strict.stderrLines.first { $0.hasPrefix("line \(index + 1): ") } ?? ""
            XCTAssertTrue(named.contains(reason), "line \(index + 1): \(named)")
        }
        XCTAssertTrue(strict.stderr.contains("\(badLines.count) of \(lines.count) lines rejected"), strict.stderr)
        XCTAssertEqual(try jobCount, 0)

        let lenient = try courier("enqueue", "--jsonl", "-", "--skip-invalid", "--json", stdin: Data(input))
        XCTAssertEqual(lenient.status, 0, lenient.stderr)
        let report = try XCTUnwrap(try lenient.json() as? [String: Any])
        XCTAssertEqual(report["inserted"] as? Int, goodCount)
        let rejected = try XCTUnwrap(report["rejected"] as? [[String: Any]])
        XCTAssertEqual(rejected.compactMap { $0["line"] as? Int }, badLines)
        XCTAssertEqual(try jobCount, goodCount)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE priority = 0 AND max_attempts = 1"), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE idempotency_key = 'last'"), 1)
    }

    func testNumbersAreJudgedByTheirTypeNotByBoolBridging() throws {
        let cases: [(String, String, Int?)] = [
            ("priority", "0", 0), ("priority", "1", 1), ("max_attempts", "1", 1), ("priority", "-0", 0),
            ("priority", "1.0", 1), ("max_attempts", "1e3", 1000), ("priority", "-5", -5),
            ("priority", "true", nil), ("priority", "false", nil), ("priority", "1.5", nil),
            ("priority", "2147483648", nil), ("priority", "9223372036854775808", nil), ("priority", "1e400", nil),
            ("priority", "\"1\"", nil),
        ]
        var input = ""
        for (field, number, _) in cases {
            input += #"{"url": "https://example.com/n", "idempotency_key": "\#(field)=\#(number)", "#
                + #""\#(field)": \#(number)}"# + "\n"
        }
        let result = try courier("enqueue", "--jsonl", "-", "--skip-invalid", "--json", stdin: Data(input.utf8))
        XCTAssertEqual(result.status, 0, result.stderr)
        let report = try XCTUnwrap(try result.json() as? [String: Any])
        let rejected = Set(try XCTUnwrap(report["rejected"] as? [[String: Any]]).compactMap { $0["line"] as? Int })
        for (index, (field, number, expected)) in cases.enumerated() {
            let key = "\(field)=\(number)"
            if let expected {
                XCTAssertFalse(rejected.contains(index + 1), "\(key) was rejected")
                let column = field == "priority" ? "priority" : "max_attempts"
                XCTAssertEqual(
                    try count(
                        "SELECT count(*) FROM courier.jobs WHERE idempotency_key = $1 AND \(column) = $2", [key, expected]),
                    1, key)
            } else {
                XCTAssertTrue(rejected.contains(index + 1), "\(key) was accepted")
            }
        }
    }
}
