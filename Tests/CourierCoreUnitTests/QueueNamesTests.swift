import XCTest

@testable import CourierCore

/// The close matches named when a command meets an unknown queue name: by edit distance,
/// bounded, never the exact name.
final class QueueNamesTests: XCTestCase {
    func testCloseMatchesByEditDistance() {
        let known = ["billing", "billing-eu", "mail", "mails", "default", "jobs", "Invoices"]
        XCTAssertEqual(QueueNames.closeMatches(to: "bililng", among: known), ["billing"])
        XCTAssertEqual(QueueNames.closeMatches(to: "biling", among: known), ["billing"])
        XCTAssertEqual(QueueNames.closeMatches(to: "mial", among: known), ["mail"], "mails is two edits away")
        XCTAssertEqual(QueueNames.closeMatches(to: "invoices", among: known), ["Invoices"])
        XCTAssertEqual(QueueNames.closeMatches(to: "billing-us", among: known), ["billing-eu", "billing"])
        XCTAssertEqual(QueueNames.closeMatches(to: "webhooks", among: known), [])
        XCTAssertEqual(QueueNames.closeMatches(to: "", among: known), [])
        XCTAssertEqual(QueueNames.closeMatches(to: "billing", among: known), [], "an exact name is no suggestion")
        XCTAssertEqual(QueueNames.closeMatches(to: "x", among: ["y", "xy", "abc"], limit: 1), ["xy"])
        let many = (0..<10_000).map { "queue-\($0)" }
        XCTAssertEqual(QueueNames.closeMatches(to: "queue-1234x", among: many, limit: 1), ["queue-1234"])
        // Long, unrelated names give up early and never match.
        XCTAssertEqual(
            QueueNames.closeMatches(
                to: String(repeating: "a", count: 500), among: [String(repeating: "b", count: 500)]), [])
        XCTAssertEqual(QueueNames.editDistance(Array("ca"), Array("ac"), giveUpAbove: 3), 1)
        XCTAssertEqual(QueueNames.editDistance(Array("kitten"), Array("sitting"), giveUpAbove: 5), 3)
        XCTAssertEqual(QueueNames.editDistance(Array("kitten"), Array("sitting"), giveUpAbove: 1), 2)
    }
}
