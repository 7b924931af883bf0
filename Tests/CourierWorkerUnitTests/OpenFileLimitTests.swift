import XCTest

@testable import CourierWorker

/// How the connection budget fits the open-file limit: raise the soft limit when the hard one
/// allows, shrink the budget when it does not, never ask for more than the hard limit.
final class OpenFileLimitTests: XCTestCase {
    func testALimitThatHoldsTheBudgetIsLeftAlone() {
        let plan = OpenFileLimit.plan(connections: 2_048, soft: 65_536, hard: 65_536)
        XCTAssertEqual(plan, .init(raiseSoftLimitTo: nil, connections: 2_048, requested: 2_048))
        XCTAssertFalse(plan.shrunk)
        // Exactly enough: the budget and the reserve.
        XCTAssertNil(OpenFileLimit.plan(connections: 2_048, soft: 2_112, hard: 2_112).raiseSoftLimitTo)
    }

    func testTheSoftLimitIsRaisedAsFarAsTheBudgetNeeds() {
        // A shell's 1,024 under a hard limit of 524,288 (systemd's default for services).
        XCTAssertEqual(
            OpenFileLimit.plan(connections: 2_048, soft: 1_024, hard: 524_288),
            .init(raiseSoftLimitTo: 2_112, connections: 2_048, requested: 2_048))
        // No hard limit at all (RLIM_INFINITY).
        XCTAssertEqual(
            OpenFileLimit.plan(connections: 10_000, soft: 1_024, hard: UInt64.max),
            .init(raiseSoftLimitTo: 10_064, connections: 10_000, requested: 10_000))
        // Exactly enough under the hard limit.
        XCTAssertEqual(
            OpenFileLimit.plan(connections: 2_048, soft: 1_024, hard: 2_112),
            .init(raiseSoftLimitTo: 2_112, connections: 2_048, requested: 2_048))
    }

    func testAHardLimitBelowTheBudgetShrinksIt() {
        // Soft and hard 1,024: nothing to raise, 960 connections and 64 for the rest.
        let plan = OpenFileLimit.plan(connections: 2_048, soft: 1_024, hard: 1_024)
        XCTAssertEqual(plan, .init(raiseSoftLimitTo: nil, connections: 960, requested: 2_048))
        XCTAssertTrue(plan.shrunk)
        // Raised to the hard limit, and still short.
        XCTAssertEqual(
            OpenFileLimit.plan(connections: 2_048, soft: 1_024, hard: 2_000),
            .init(raiseSoftLimitTo: 2_000, connections: 1_936, requested: 2_048))
        // A tiny limit keeps a quarter for the rest, and at least one connection.
        XCTAssertEqual(
            OpenFileLimit.plan(connections: 2_048, soft: 64, hard: 64),
            .init(raiseSoftLimitTo: nil, connections: 48, requested: 2_048))
        XCTAssertEqual(OpenFileLimit.plan(connections: 2_048, soft: 1, hard: 1).connections, 1)
        XCTAssertEqual(OpenFileLimit.plan(connections: 2_048, soft: 0, hard: 0).connections, 1)
    }

    func testASmallBudgetUnderASmallLimitIsKept() {
        // 50 connections fit in 100 descriptors with a quarter kept for the rest.
        let plan = OpenFileLimit.plan(connections: 50, soft: 100, hard: 100)
        XCTAssertEqual(plan, .init(raiseSoftLimitTo: nil, connections: 50, requested: 50))
        XCTAssertFalse(plan.shrunk)
    }

    func testTheNotesSayWhatWasDoneAndWhatToDo() {
        let raised = OpenFileLimit.Note.raised(from: 1_024, to: 2_112, connections: 2_048)
        XCTAssertFalse(raised.isWarning)
        XCTAssertEqual(
            raised.message,
            "raised the open-file limit from 1024 to 2112 for 2048 receiver connections and 64 others")
        let shrunk = OpenFileLimit.Note.shrunk(limit: 1_024, hard: 1_024, connections: 960, asked: 2_048)
        XCTAssertTrue(shrunk.isWarning)
        XCTAssertTrue(shrunk.message.contains("holds 960 receiver connections, not the 2048"), shrunk.message)
        XCTAssertTrue(shrunk.message.contains("to at least 2112, or lower --max-connections"), shrunk.message)
    }
}
