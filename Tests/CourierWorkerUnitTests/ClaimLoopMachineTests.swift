import CourierCore
import Foundation
import XCTest

@testable import CourierWorker

/// The claim loop's decisions, transition by transition, with no clock, database or socket.
final class ClaimLoopMachineTests: XCTestCase {
    private let second: Duration = .seconds(1)

    private func machine(slots: Int = 4, batch: Int = 4, grace: Double = 10) -> ClaimLoopMachine {
        ClaimLoopMachine(
            settings: .init(
                slots: slots, batchSize: batch, pollInterval: second, heartbeatInterval: second * 15,
                gracePeriod: .seconds(grace), giveUpAfter: second * 5, deferral: .milliseconds(250)),
            now: .zero)
    }

    private func refs(_ ids: ClosedRange<Int64>, attempt: Int = 1) -> [JobRef] {
        ids.map { JobRef(id: $0, attempt: attempt) }
    }

    private func record(_ ref: JobRef, _ transition: JobTransition = .succeed) -> AttemptRecord {
        AttemptRecord(
            jobID: ref.id, attempt: ref.attempt, transition: transition, delivery: .delivered(status: 200),
            startedAt: Date(timeIntervalSince1970: 0), finishedAt: Date(timeIntervalSince1970: 1))
    }

    /// Starts a machine with `started` jobs in flight after its first claim at t = 0.
    private func busy(_ m: inout ClaimLoopMachine, started: [JobRef], requested: Int? = nil) {
        XCTAssertEqual(m.handle(.tick, now: .zero), [.run(.claim(limit: m.settings.batchSize))])
        _ = m.handle(.claimed(started: started, deferred: [], requested: requested ?? m.settings.batchSize), now: .zero)
    }

    /// Answers every statement the machine runs with a connection failure and every sleep with
    /// its timer, from `actions` at `start`, until it exits; returns when it did.
    private func failEveryStatementUntilExit(
        _ m: inout ClaimLoopMachine, _ first: [LoopAction], from start: Duration
    ) -> Duration {
        var actions = first
        var now = start
        for _ in 0..<100 {
            if actions == [.exit] { return now }
            if case .run(let statement) = actions.last {
                actions = m.handle(.failed(statement, connection: true), now: now)
            } else if case .sleep(let until?) = actions.last {
                now = until
                actions = m.handle(.tick, now: now)
            } else {
                XCTFail("unexpected actions \(actions)")
                return now
            }
        }
        XCTFail("the machine never gave up")
        return now
    }

    func testFirstEventClaimsAtOnce() {
        var m = machine()
        XCTAssertEqual(m.handle(.tick, now: .zero), [.run(.claim(limit: 4))])
    }

    func testEmptyClaimSleepsUntilNextPoll() {
        var m = machine()
        _ = m.handle(.tick, now: .zero)
        XCTAssertEqual(m.handle(.claimed(started: [], deferred: [], requested: 4), now: .nanoseconds(100)), [.sleep(until: .nanoseconds(100) + second)])
        XCTAssertEqual(m.handle(.tick, now: .nanoseconds(100) + second), [.run(.claim(limit: 4))])
    }

    func testAllSlotsBusyAndPollDueSleepsUntilHeartbeat() {
        var m = machine()
        busy(&m, started: refs(1...4))
        // Long after the poll interval, with no free slot: no claim, no busy loop.
        XCTAssertEqual(m.handle(.tick, now: second * 5), [.sleep(until: second * 15)])
        XCTAssertEqual(m.handle(.notified, now: second * 6), [.sleep(until: second * 15)])
    }

    func testHeartbeatWhenDueExtendsEveryLeaseInFlight() {
        var m = machine()
        busy(&m, started: refs(1...4))
        XCTAssertEqual(m.handle(.tick, now: second * 15), [.run(.heartbeat(refs(1...4)))])
        XCTAssertEqual(
            m.handle(.succeeded(.heartbeat(refs(1...4)), lost: []), now: second * 15),
            [.sleep(until: second * 30)])
    }

    func testNotificationClaimsForAFreeSlot() {
        var m = machine()
        busy(&m, started: refs(1...3))
        XCTAssertEqual(m.handle(.notified, now: .nanoseconds(10)), [.run(.claim(limit: 1))])
    }

    func testFinishedOutcomeIsWrittenBeforeAnythingElse() {
        var m = machine()
        busy(&m, started: refs(1...4))
        let done = record(JobRef(id: 2, attempt: 1))
        XCTAssertEqual(m.handle(.finished([done], interrupted: false), now: second * 2), [.run(.record([done]))])
        // Written: the freed slot is claimed since the poll is due.
        XCTAssertEqual(m.handle(.succeeded(.record([done]), lost: []), now: second * 2), [.run(.claim(limit: 1))])
        XCTAssertTrue(m.unwritten.isEmpty)
    }

    func testOutcomesArrivingDuringAStatementWaitForIt() {
        var m = machine()
        busy(&m, started: refs(1...4))
        let first = record(JobRef(id: 1, attempt: 1))
        let second = record(JobRef(id: 2, attempt: 1))
        XCTAssertEqual(m.handle(.finished([first], interrupted: false), now: .nanoseconds(1)), [.run(.record([first]))])
        // One statement at a time: the second outcome waits.
        XCTAssertEqual(m.handle(.finished([second], interrupted: false), now: .nanoseconds(2)), [])
        XCTAssertEqual(m.handle(.succeeded(.record([first]), lost: []), now: .nanoseconds(3)), [.run(.record([second]))])
    }

    func testFailedRecordKeepsOutcomesAndRetriesAfterADelay() {
        var m = machine()
        busy(&m, started: refs(1...4))
        let done = record(JobRef(id: 1, attempt: 1))
        _ = m.handle(.finished([done], interrupted: false), now: .zero)
        let retryAt = ClaimLoopMachine.retryDelay(failures: 1, jitter: 1)
        XCTAssertEqual(m.handle(.failed(.record([done]), connection: true), now: .zero), [.sleep(until: retryAt)])
        // Not before the delay, even when woken.
        XCTAssertEqual(m.handle(.notified, now: retryAt - .nanoseconds(1)), [.sleep(until: retryAt)])
        XCTAssertEqual(m.handle(.tick, now: retryAt), [.run(.record([done]))])
    }

    func testRecordedOutcomesAreNotWrittenAgainWhenALaterStatementFails() {
        var m = machine()
        busy(&m, started: refs(1...4))
        let done = record(JobRef(id: 1, attempt: 1))
        _ = m.handle(.finished([done], interrupted: false), now: .zero)
        XCTAssertEqual(m.handle(.succeeded(.record([done]), lost: []), now: second * 2), [.run(.claim(limit: 1))])
        // The claim fails: nothing of the written outcome comes back.
        _ = m.handle(.failed(.claim(limit: 1), connection: true), now: second * 2)
        XCTAssertTrue(m.unwritten.isEmpty)
        let later = second * 2 + ClaimLoopMachine.retryDelay(failures: 1, jitter: 1)
        XCTAssertEqual(m.handle(.tick, now: later), [.run(.claim(limit: 1))])
    }

    func testFailedClaimIsNotRetriedInATightLoopAndBacksOff() {
        var m = machine()
        _ = m.handle(.tick, now: .zero)
        var now: Duration = .zero
        var delays: [Duration] = []
        for _ in 0..<8 {
            let actions = m.handle(.failed(.claim(limit: 4), connection: true), now: now)
            guard case .sleep(let until?) = actions.last else { return XCTFail("expected a sleep, got \(actions)") }
            delays.append(until - now)
            XCTAssertEqual(m.handle(.notified, now: until - .nanoseconds(1)), [.sleep(until: until)])
            now = until
            XCTAssertEqual(m.handle(.tick, now: now), [.run(.claim(limit: 4))])
        }
        XCTAssertEqual(delays.first, .milliseconds(100))
        XCTAssertEqual(delays.last, second * 5)
        XCTAssertEqual(delays, delays.sorted())
        // One success resets the delay.
        _ = m.handle(.claimed(started: [], deferred: [], requested: 4), now: now)
        _ = m.handle(.tick, now: now + second)
        XCTAssertEqual(
            m.handle(.failed(.claim(limit: 4), connection: false), now: now + second),
            [.sleep(until: now + second + .milliseconds(100))])
    }

    func testDeferredJobsAreGivenBackAfterKnownOutcomesAndNeverClaimedAtOnce() {
        var m = machine()
        _ = m.handle(.tick, now: .zero)
        let deferred = refs(3...4)
        let done = record(JobRef(id: 1, attempt: 1))
        XCTAssertEqual(
            m.handle(.claimed(started: refs(1...2), deferred: deferred, requested: 4), now: .zero),
            [.run(.release(deferred, delay: .milliseconds(250)))])
        // An outcome arrives while the release runs; it is written next, and the released jobs
        // are not touched again.
        XCTAssertEqual(m.handle(.finished([done], interrupted: false), now: .nanoseconds(1)), [])
        XCTAssertEqual(m.handle(.succeeded(.release(deferred, delay: .milliseconds(250)), lost: []), now: .nanoseconds(2)), [.run(.record([done]))])
        XCTAssertTrue(m.toRelease.isEmpty)
    }

    func testGiveBackWaitsForOutcomesAlreadyKnown() {
        var m = machine()
        _ = m.handle(.tick, now: .zero)
        let done = record(JobRef(id: 1, attempt: 1))
        _ = m.handle(.finished([done], interrupted: false), now: .zero)  // (arrives before the claim's answer)
        let actions = m.handle(.claimed(started: refs(1...2), deferred: refs(3...3), requested: 4), now: .zero)
        XCTAssertEqual(actions, [.run(.record([done]))])
    }

    func testHostAtItsCapIsClaimedAgainOnceAnOutcomeIsWritten() {
        var m = machine(slots: 8, batch: 8)
        XCTAssertEqual(m.handle(.tick, now: .zero), [.run(.claim(limit: 8))])
        // The host's cap allowed 3 of 8: not a full batch, but held back.
        XCTAssertEqual(
            m.handle(.claimed(started: refs(1...3), deferred: [], requested: 8, heldBack: true), now: .zero),
            [.sleep(until: second)])
        let one = record(JobRef(id: 1, attempt: 1))
        XCTAssertEqual(m.handle(.finished([one], interrupted: false), now: .nanoseconds(10)), [.run(.record([one]))])
        // The written outcome freed room at the host: claim now, not at the poll.
        XCTAssertEqual(m.handle(.succeeded(.record([one]), lost: []), now: .nanoseconds(20)), [.run(.claim(limit: 6))])
        // Without held-back hosts, a short claim waits for the poll or a notification.
        XCTAssertEqual(
            m.handle(.claimed(started: refs(4...4), deferred: [], requested: 6, heldBack: false), now: .nanoseconds(30)),
            [.sleep(until: .nanoseconds(30) + second)])
        let two = record(JobRef(id: 2, attempt: 1))
        _ = m.handle(.finished([two], interrupted: false), now: .nanoseconds(40))
        XCTAssertEqual(m.handle(.succeeded(.record([two]), lost: []), now: .nanoseconds(50)), [.sleep(until: .nanoseconds(30) + second)])
    }

    func testFullBatchRefillsOnlyOnceEnoughSlotsAreFree() {
        var m = machine(slots: 8, batch: 4)
        // refillThreshold = min(4, 8 / 4) = 2.
        XCTAssertEqual(m.handle(.tick, now: .zero), [.run(.claim(limit: 4))])
        XCTAssertEqual(
            m.handle(.claimed(started: refs(1...4), deferred: [], requested: 4), now: .zero), [.run(.claim(limit: 4))])
        XCTAssertEqual(
            m.handle(.claimed(started: refs(5...8), deferred: [], requested: 4), now: .zero),
            [.sleep(until: second * 15)])
        let one = record(JobRef(id: 1, attempt: 1))
        _ = m.handle(.finished([one], interrupted: false), now: .nanoseconds(10))
        // One slot free, poll not due: wait for another.
        XCTAssertEqual(m.handle(.succeeded(.record([one]), lost: []), now: .nanoseconds(10)), [.sleep(until: second)])
        let two = record(JobRef(id: 2, attempt: 1))
        _ = m.handle(.finished([two], interrupted: false), now: .nanoseconds(20))
        XCTAssertEqual(m.handle(.succeeded(.record([two]), lost: []), now: .nanoseconds(20)), [.run(.claim(limit: 2))])
    }

    func testStopClaimsNothingAndExitsOnceInFlightWorkIsWritten() {
        var m = machine()
        busy(&m, started: refs(1...2))
        XCTAssertEqual(m.handle(.stopRequested, now: second), [.sleep(until: second * 11)])
        XCTAssertEqual(m.handle(.notified, now: second * 2), [.sleep(until: second * 11)])
        let a = record(JobRef(id: 1, attempt: 1))
        let b = record(JobRef(id: 2, attempt: 1))
        XCTAssertEqual(m.handle(.finished([a, b], interrupted: false), now: second * 3), [.run(.record([a, b]))])
        XCTAssertEqual(m.handle(.succeeded(.record([a, b]), lost: []), now: second * 3), [.exit])
        XCTAssertTrue(m.hasExited)
        XCTAssertEqual(m.handle(.tick, now: second * 4), [])
    }

    func testStopWithNothingInFlightExitsAtOnce() {
        var m = machine()
        _ = m.handle(.tick, now: .zero)
        _ = m.handle(.claimed(started: [], deferred: [], requested: 4), now: .zero)
        XCTAssertEqual(m.handle(.stopRequested, now: .nanoseconds(1)), [.exit])
    }

    func testGraceOverInterruptsWhatIsInFlightAndDropsLateOutcomes() {
        var m = machine()
        busy(&m, started: refs(1...3))
        _ = m.handle(.stopRequested, now: .zero)
        let finishedInTime = record(JobRef(id: 1, attempt: 1))
        _ = m.handle(.finished([finishedInTime], interrupted: false), now: second)
        _ = m.handle(.succeeded(.record([finishedInTime]), lost: []), now: second)
        // Grace period over with jobs 2 and 3 still in flight.
        let cut = refs(2...3)
        XCTAssertEqual(m.handle(.tick, now: second * 10), [.cancelDeliveries(cut), .interrupt(cut)])
        let interrupted = cut.map { record($0, .retry(delay: .zero)) }
        XCTAssertEqual(m.handle(.finished(interrupted, interrupted: true), now: second * 10), [.run(.record(interrupted))])
        // The real outcome of job 2 arrives late: dropped, never written a second time.
        XCTAssertEqual(m.handle(.finished([record(cut[0])], interrupted: false), now: second * 10), [])
        XCTAssertEqual(m.handle(.succeeded(.record(interrupted), lost: []), now: second * 10), [.exit])
    }

    func testStopWithTheDatabaseDownExitsAfterGracePlusGiveUp() {
        var m = machine()
        busy(&m, started: refs(1...1))
        _ = m.handle(.stopRequested, now: .zero)
        let done = record(JobRef(id: 1, attempt: 1))
        let actions = m.handle(.finished([done], interrupted: false), now: second)
        let now = failEveryStatementUntilExit(&m, actions, from: second)
        XCTAssertGreaterThanOrEqual(now, second * 15)
        XCTAssertLessThanOrEqual(now, second * 15 + second * 5)
    }

    func testStopWithTheDatabaseDownAndJobsStillInFlightAlsoEnds() {
        var m = machine(grace: 2)
        busy(&m, started: refs(1...2))
        _ = m.handle(.stopRequested, now: .zero)
        var now = second * 2
        var actions = m.handle(.tick, now: now)
        XCTAssertEqual(actions, [.cancelDeliveries(refs(1...2)), .interrupt(refs(1...2))])
        actions = m.handle(.finished(refs(1...2).map { record($0, .retry(delay: .zero)) }, interrupted: true), now: now)
        now = failEveryStatementUntilExit(&m, actions, from: now)
        XCTAssertLessThanOrEqual(now, second * 2 + second * 5 + second * 5)
    }

    func testIdleMachineWithoutWorkSleepsUntilPollOnly() {
        var m = machine()
        _ = m.handle(.tick, now: .zero)
        XCTAssertEqual(m.handle(.claimed(started: [], deferred: [], requested: 4), now: .zero), [.sleep(until: second)])
        // No heartbeat is due with nothing in flight, however long it has been.
        XCTAssertEqual(m.handle(.tick, now: second * 100), [.run(.claim(limit: 4))])
        XCTAssertEqual(
            m.handle(.claimed(started: [], deferred: [], requested: 4), now: second * 100),
            [.sleep(until: second * 101)])
    }

    func testRetryDelayDoublesAndCaps() {
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 1, jitter: 1), .milliseconds(100))
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 2, jitter: 1), .milliseconds(200))
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 6, jitter: 1), .milliseconds(3200))
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 7, jitter: 1), .seconds(5))
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 1000, jitter: 1), .seconds(5))
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 1, jitter: 1.25), .milliseconds(125))
    }
}
