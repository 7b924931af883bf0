import Foundation
import XCTest

@testable import CourierWorker

/// The body budget's rule, request by request, and its waiting tasks.
final class BodyBudgetTests: XCTestCase {
    func testRequestsThatFitAreGrantedAtOnceAndTheRestWaitInOrder() {
        var state = BodyBudgetState(capacity: 100)
        XCTAssertTrue(state.request(id: 1, bytes: 60))
        XCTAssertTrue(state.request(id: 2, bytes: 40))
        XCTAssertFalse(state.request(id: 3, bytes: 50))
        // A small request does not pass one that waits before it.
        XCTAssertFalse(state.request(id: 4, bytes: 1))
        XCTAssertEqual(state.used, 100)
        XCTAssertEqual(state.release(bytes: 40), [], "50 does not fit beside 60")
        XCTAssertEqual(state.release(bytes: 60), [3, 4])
        XCTAssertEqual(state.used, 51)
        XCTAssertTrue(state.waiting.isEmpty)
    }

    func testARequestLargerThanTheBudgetGoesAloneWhenNothingElseIsHeld() {
        var state = BodyBudgetState(capacity: 100)
        XCTAssertTrue(state.request(id: 1, bytes: 30))
        XCTAssertFalse(state.request(id: 2, bytes: 250))
        XCTAssertFalse(state.request(id: 3, bytes: 10))
        XCTAssertEqual(state.release(bytes: 30), [2])
        XCTAssertEqual(state.used, 250)
        XCTAssertEqual(state.release(bytes: 250), [3])
        var empty = BodyBudgetState(capacity: 100)
        XCTAssertTrue(empty.request(id: 9, bytes: 1_000), "nothing held: even an oversized body goes")
    }

    func testWithdrawingTheFirstWaiterLetsTheOnesBehindItThrough() {
        var state = BodyBudgetState(capacity: 100)
        XCTAssertTrue(state.request(id: 1, bytes: 50))
        XCTAssertFalse(state.request(id: 2, bytes: 80))
        XCTAssertFalse(state.request(id: 3, bytes: 20))
        XCTAssertEqual(state.withdraw(id: 2), [3])
        XCTAssertNil(state.withdraw(id: 2), "no longer waiting")
        XCTAssertEqual(state.used, 70)
    }

    func testAWaitingTaskGetsItsBytesWhenOthersGiveThemBack() async throws {
        let budget = BodyBudget(bytes: 100)
        try await budget.acquire(100)
        let granted = Task { try await budget.acquire(40) }
        try await Task.sleep(for: .milliseconds(50))
        XCTAssertEqual(budget.used, 100, "the second request waits")
        budget.release(100)
        try await granted.value
        XCTAssertEqual(budget.used, 40)
    }

    func testACancelledWaiterHoldsNothingAndUnblocksTheNext() async throws {
        let budget = BodyBudget(bytes: 100)
        try await budget.acquire(60)
        let big = Task { try await budget.acquire(90) }
        try await Task.sleep(for: .milliseconds(50))
        let small = Task { try await budget.acquire(30) }
        try await Task.sleep(for: .milliseconds(50))
        XCTAssertEqual(budget.used, 60, "30 waits behind 90")
        big.cancel()
        do {
            try await big.value
            XCTFail("a cancelled waiter must not be granted")
        } catch is CancellationError {}
        try await small.value
        XCTAssertEqual(budget.used, 90)
        // Cancelled before it asks: it never holds anything either.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await budget.acquire(10)
        }
        do {
            try await early.value
            XCTFail("cancelled before asking")
        } catch is CancellationError {}
        XCTAssertEqual(budget.used, 90)
    }
}
