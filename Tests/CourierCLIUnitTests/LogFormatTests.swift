import Foundation
import XCTest

@testable import CourierCLI

/// The worker's log line formats on their own: journald priorities, one JSON object per line,
/// and when the journal format is picked by itself.
final class LogFormatTests: XCTestCase {
    func testJournalFormatPrefixesPriorities() {
        let line = LogFormat.render(
            .journal, level: .error, label: "courier.worker", message: "database gone\nreconnecting",
            metadata: ["job.id": "42", "error": "connection refused"], date: Date(timeIntervalSince1970: 0))
        XCTAssertEqual(line, #"<3>database gone reconnecting error="connection refused" job.id=42"#)
        XCTAssertEqual(LogFormat.priority(.warning), 4)
        XCTAssertEqual(LogFormat.priority(.info), 6)
        XCTAssertEqual(LogFormat.priority(.debug), 7)
    }

    func testJSONFormatIsOneObjectPerLine() throws {
        let line = LogFormat.render(
            .json, level: .warning, label: "courier.worker", message: "job moved to the dead letters",
            metadata: ["job.id": "7"], date: Date(timeIntervalSince1970: 0))
        XCTAssertFalse(line.contains("\n"))
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        XCTAssertEqual(object["level"], "warning")
        XCTAssertEqual(object["job.id"], "7")
        XCTAssertEqual(object["message"], "job moved to the dead letters")
        XCTAssertEqual(object["time"], "1970-01-01T00:00:00.000Z")
    }

    func testAutoDetectsTheJournalOnlyWhenStderrIsItsStream() {
        XCTAssertEqual(LogFormat.detect(journalStream: "8:1234", stderrIdentity: (8, 1234)), .journal)
        XCTAssertEqual(LogFormat.detect(journalStream: "8:1234", stderrIdentity: (8, 999)), .text)
        XCTAssertEqual(LogFormat.detect(journalStream: nil, stderrIdentity: (8, 1234)), .text)
        XCTAssertEqual(LogFormat.detect(journalStream: "garbage", stderrIdentity: (8, 1234)), .text)
    }
}
