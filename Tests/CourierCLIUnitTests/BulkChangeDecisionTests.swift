import XCTest

@testable import CourierCLI

/// What a bulk change by filter does, by the count it matched and how it was run: nothing to
/// do, report only (`--dry-run`), proceed (`--yes`), ask on a terminal, refuse in a script.
final class BulkChangeDecisionTests: XCTestCase {
    func testDecisionTable() {
        typealias D = BulkChangeOptions.Decision
        let cases: [(count: Int, yes: Bool, dryRun: Bool, terminal: Bool, expected: D)] = [
            (0, false, false, false, .nothingMatches), (0, true, true, true, .nothingMatches),
            (1, false, true, false, .report), (5, true, true, true, .report),
            (1, true, false, false, .proceed), (1, true, false, true, .proceed),
            (1, false, false, true, .ask), (1, false, false, false, .refuse),
        ]
        for c in cases {
            XCTAssertEqual(
                BulkChangeOptions.decide(count: c.count, yes: c.yes, dryRun: c.dryRun, stdinIsTerminal: c.terminal),
                c.expected, "\(c)")
        }
    }
}
