import CourierCore
import Foundation
import XCTest

@testable import CourierWorker

/// The claim loop's decisions, transition by transition, with no clock, database or socket.
final class ClaimLoopMachineTests: XCTestCase {
    private let second: UInt64 = 1_000_000_000

    private func machine(slots: Int = 4, batch: Int = 4, grace: Double = 10) -> ClaimLoopMachine {
        ClaimLoopMachine(
            settings: .init(
                slots: slots, batchSize: batch, pollInterval: 1 * second, heartbeatInterval: 15 * second,
                gracePeriod: UInt64(grace * 1e9), giveUpAfter: 5 * second, deferral: 0.25),
            now: 0)
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
        XCTAssertEqual(m.handle(.tick, now: 0), [.run(.claim(limit: m.settings.batchSize))])
        _ = m.handle(.claimed(started: started, deferred: [], requested: requested ?? m.settings.batchSize), now: 0)
    }

    /// Answers every statement the machine runs with a connection failure and every sleep with
    /// its timer, from `actions` at `start`, until it exits; returns when it did.
    private func failEveryStatementUntilExit(
        _ m: inout ClaimLoopMachine, _ first: [LoopAction], from start: UInt64
    ) -> UInt64 {
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
        XCTAssertEqual(m.handle(.tick, now: 0), [.run(.claim(limit: 4))])
    }

    func testEmptyClaimSleepsUntilNextPoll() {
        var m = machine()
        _ = m.handle(.tick, now: 0)
        XCTAssertEqual(m.handle(.claimed(started: [], deferred: [], requested: 4), now: 100), [.sleep(untilNanos: 100 + second)])
        XCTAssertEqual(m.handle(.tick, now: 100 + second), [.run(.claim(limit: 4))])
    }

    func testAllSlotsBusyAndPollDueSleepsUntilHeartbeat() {
        var m = machine()
        busy(&m, started: refs(1...4))
        // Long after the poll interval, with no free slot: no claim, no busy loop.
        XCTAssertEqual(m.handle(.tick, now: 5 * second), [.sleep(untilNanos: 15 * second)])
        XCTAssertEqual(m.handle(.notified, now: 6 * second), [.sleep(untilNanos: 15 * second)])
    }

    func testHeartbeatWhenDueExtendsEveryLeaseInFlight() {
        var m = machine()
        busy(&m, started: refs(1...4))
        XCTAssertEqual(m.handle(.tick, now: 15 * second), [.run(.heartbeat(refs(1...4)))])
        XCTAssertEqual(
            m.handle(.succeeded(.heartbeat(refs(1...4)), lost: []), now: 15 * second),
            [.sleep(untilNanos: 30 * second)])
    }

    func testNotificationClaimsForAFreeSlot() {
        var m = machine()
        busy(&m, started: refs(1...3))
        XCTAssertEqual(m.handle(.notified, now: 10), [.run(.claim(limit: 1))])
    }

    func testFinishedOutcomeIsWrittenBeforeAnythingElse() {
        var m = machine()
        busy(&m, started: refs(1...4))
        let done = record(JobRef(id: 2, attempt: 1))
        XCTAssertEqual(m.handle(.finished([done], interrupted: false), now: 2 * second), [.run(.record([done]))])
        // Written: the freed slot is claimed since the poll is due.
        XCTAssertEqual(m.handle(.succeeded(.record([done]), lost: []), now: 2 * second), [.run(.claim(limit: 1))])
        XCTAssertTrue(m.unwritten.isEmpty)
    }

    func testOutcomesArrivingDuringAStatementWaitForIt() {
        var m = machine()
        busy(&m, started: refs(1...4))
        let first = record(JobRef(id: 1, attempt: 1))
        let second = record(JobRef(id: 2, attempt: 1))
        XCTAssertEqual(m.handle(.finished([first], interrupted: false), now: 1), [.run(.record([first]))])
        // One statement at a time: the second outcome waits.
        XCTAssertEqual(m.handle(.finished([second], interrupted: false), now: 2), [])
        XCTAssertEqual(m.handle(.succeeded(.record([first]), lost: []), now: 3), [.run(.record([second]))])
    }

    func testFailedRecordKeepsOutcomesAndRetriesAfterADelay() {
        var m = machine()
        busy(&m, started: refs(1...4))
        let done = record(JobRef(id: 1, attempt: 1))
        _ = m.handle(.finished([done], interrupted: false), now: 0)
        let retryAt = ClaimLoopMachine.retryDelay(failures: 1, jitter: 1)
        XCTAssertEqual(m.handle(.failed(.record([done]), connection: true), now: 0), [.sleep(untilNanos: retryAt)])
        // Not before the delay, even when woken.
        XCTAssertEqual(m.handle(.notified, now: retryAt - 1), [.sleep(untilNanos: retryAt)])
        XCTAssertEqual(m.handle(.tick, now: retryAt), [.run(.record([done]))])
    }

    func testRecordedOutcomesAreNotWrittenAgainWhenALaterStatementFails() {
        var m = machine()
        busy(&m, started: refs(1...4))
        let done = record(JobRef(id: 1, attempt: 1))
        _ = m.handle(.finished([done], interrupted: false), now: 0)
        XCTAssertEqual(m.handle(.succeeded(.record([done]), lost: []), now: 2 * second), [.run(.claim(limit: 1))])
        // The claim fails: nothing of the written outcome comes back.
        _ = m.handle(.failed(.claim(limit: 1), connection: true), now: 2 * second)
        XCTAssertTrue(m.unwritten.isEmpty)
        let later = 2 * second + ClaimLoopMachine.retryDelay(failures: 1, jitter: 1)
        XCTAssertEqual(m.handle(.tick, now: later), [.run(.claim(limit: 1))])
    }

    func testFailedClaimIsNotRetriedInATightLoopAndBacksOff() {
        var m = machine()
        _ = m.handle(.tick, now: 0)
        var now: UInt64 = 0
        var delays: [UInt64] = []
        for _ in 0..<8 {
            let actions = m.handle(.failed(.claim(limit: 4), connection: true), now: now)
            guard case .sleep(let until?) = actions.last else { return XCTFail("expected a sleep, got \(actions)") }
            delays.append(until - now)
            XCTAssertEqual(m.handle(.notified, now: until - 1), [.sleep(untilNanos: until)])
            now = until
            XCTAssertEqual(m.handle(.tick, now: now), [.run(.claim(limit: 4))])
        }
        XCTAssertEqual(delays.first, 100_000_000)
        XCTAssertEqual(delays.last, 5 * second)
        XCTAssertEqual(delays, delays.sorted())
        // One success resets the delay.
        _ = m.handle(.claimed(started: [], deferred: [], requested: 4), now: now)
        _ = m.handle(.tick, now: now + second)
        XCTAssertEqual(
            m.handle(.failed(.claim(limit: 4), connection: false), now: now + second),
            [.sleep(untilNanos: now + second + 100_000_000)])
    }

    func testDeferredJobsAreGivenBackAfterKnownOutcomesAndNeverClaimedAtOnce() {
        var m = machine()
        _ = m.handle(.tick, now: 0)
        let deferred = refs(3...4)
        let done = record(JobRef(id: 1, attempt: 1))
        XCTAssertEqual(
            m.handle(.claimed(started: refs(1...2), deferred: deferred, requested: 4), now: 0),
            [.run(.release(deferred, delay: 0.25))])
        // An outcome arrives while the release runs; it is written next, and the released jobs
        // are not touched again.
        XCTAssertEqual(m.handle(.finished([done], interrupted: false), now: 1), [])
        XCTAssertEqual(m.handle(.succeeded(.release(deferred, delay: 0.25), lost: []), now: 2), [.run(.record([done]))])
        XCTAssertTrue(m.toRelease.isEmpty)
    }

    func testGiveBackWaitsForOutcomesAlreadyKnown() {
        var m = machine()
        _ = m.handle(.tick, now: 0)
        let done = record(JobRef(id: 1, attempt: 1))
        _ = m.handle(.finished([done], interrupted: false), now: 0)  // (arrives before the claim's answer)
        let actions = m.handle(.claimed(started: refs(1...2), deferred: refs(3...3), requested: 4), now: 0)
        XCTAssertEqual(actions, [.run(.record([done]))])
    }

    func testHostAtItsCapIsClaimedAgainOnceAnOutcomeIsWritten() {
        var m = machine(slots: 8, batch: 8)
        XCTAssertEqual(m.handle(.tick, now: 0), [.run(.claim(limit: 8))])
        // The host's cap allowed 3 of 8: not a full batch, but held back.
        XCTAssertEqual(
            m.handle(.claimed(started: refs(1...3), deferred: [], requested: 8, heldBack: true), now: 0),
            [.sleep(untilNanos: second)])
        let one = record(JobRef(id: 1, attempt: 1))
        XCTAssertEqual(m.handle(.finished([one], interrupted: false), now: 10), [.run(.record([one]))])
        // The written outcome freed room at the host: claim now, not at the poll.
        XCTAssertEqual(m.handle(.succeeded(.record([one]), lost: []), now: 20), [.run(.claim(limit: 6))])
        // Without held-back hosts, a short claim waits for the poll or a notification.
        XCTAssertEqual(
            m.handle(.claimed(started: refs(4...4), deferred: [], requested: 6, heldBack: false), now: 30),
            [.sleep(untilNanos: 30 + second)])
        let two = record(JobRef(id: 2, attempt: 1))
        _ = m.handle(.finished([two], interrupted: false), now: 40)
        XCTAssertEqual(m.handle(.succeeded(.record([two]), lost: []), now: 50), [.sleep(untilNanos: 30 + second)])
    }

    func testFullBatchRefillsOnlyOnceEnoughSlotsAreFree() {
        var m = machine(slots: 8, batch: 4)
        // refillThreshold = min(4, 8 / 4) = 2.
        XCTAssertEqual(m.handle(.tick, now: 0), [.run(.claim(limit: 4))])
        XCTAssertEqual(
            m.handle(.claimed(started: refs(1...4), deferred: [], requested: 4), now: 0), [.run(.claim(limit: 4))])
        XCTAssertEqual(
            m.handle(.claimed(started: refs(5...8), deferred: [], requested: 4), now: 0),
            [.sleep(untilNanos: 15 * second)])
        let one = record(JobRef(id: 1, attempt: 1))
        _ = m.handle(.finished([one], interrupted: false), now: 10)
        // One slot free, poll not due: wait for another.
        XCTAssertEqual(m.handle(.succeeded(.record([one]), lost: []), now: 10), [.sleep(untilNanos: second)])
        let two = record(JobRef(id: 2, attempt: 1))
        _ = m.handle(.finished([two], interrupted: false), now: 20)
        XCTAssertEqual(m.handle(.succeeded(.record([two]), lost: []), now: 20), [.run(.claim(limit: 2))])
    }

    func testStopClaimsNothingAndExitsOnceInFlightWorkIsWritten() {
        var m = machine()
        busy(&m, started: refs(1...2))
        XCTAssertEqual(m.handle(.stopRequested, now: second), [.sleep(untilNanos: 11 * second)])
        XCTAssertEqual(m.handle(.notified, now: 2 * second), [.sleep(untilNanos: 11 * second)])
        let a = record(JobRef(id: 1, attempt: 1))
        let b = record(JobRef(id: 2, attempt: 1))
        XCTAssertEqual(m.handle(.finished([a, b], interrupted: false), now: 3 * second), [.run(.record([a, b]))])
        XCTAssertEqual(m.handle(.succeeded(.record([a, b]), lost: []), now: 3 * second), [.exit])
        XCTAssertTrue(m.hasExited)
        XCTAssertEqual(m.handle(.tick, now: 4 * second), [])
    }

    func testStopWithNothingInFlightExitsAtOnce() {
        var m = machine()
        _ = m.handle(.tick, now: 0)
        _ = m.handle(.claimed(started: [], deferred: [], requested: 4), now: 0)
        XCTAssertEqual(m.handle(.stopRequested, now: 1), [.exit])
    }

    func testGraceOverInterruptsWhatIsInFlightAndDropsLateOutcomes() {
        var m = machine()
        busy(&m, started: refs(1...3))
        _ = m.handle(.stopRequested, now: 0)
        let finishedInTime = record(JobRef(id: 1, attempt: 1))
        _ = m.handle(.finished([finishedInTime], interrupted: false), now: second)
        _ = m.handle(.succeeded(.record([finishedInTime]), lost: []), now: second)
        // Grace period over with jobs 2 and 3 still in flight.
        let cut = refs(2...3)
        XCTAssertEqual(m.handle(.tick, now: 10 * second), [.cancelDeliveries(cut), .interrupt(cut)])
        let interrupted = cut.map { record($0, .retry(delay: .zero)) }
        XCTAssertEqual(m.handle(.finished(interrupted, interrupted: true), now: 10 * second), [.run(.record(interrupted))])
        // The real outcome of job 2 arrives late: dropped, never written a second time.
        XCTAssertEqual(m.handle(.finished([record(cut[0])], interrupted: false), now: 10 * second), [])
        XCTAssertEqual(m.handle(.succeeded(.record(interrupted), lost: []), now: 10 * second), [.exit])
    }

    func testStopWithTheDatabaseDownExitsAfterGracePlusGiveUp() {
        var m = machine()
        busy(&m, started: refs(1...1))
        _ = m.handle(.stopRequested, now: 0)
        let done = record(JobRef(id: 1, attempt: 1))
        let actions = m.handle(.finished([done], interrupted: false), now: second)
        let now = failEveryStatementUntilExit(&m, actions, from: second)
        XCTAssertGreaterThanOrEqual(now, 15 * second)
        XCTAssertLessThanOrEqual(now, 15 * second + 5 * second)
    }

    func testStopWithTheDatabaseDownAndJobsStillInFlightAlsoEnds() {
        var m = machine(grace: 2)
        busy(&m, started: refs(1...2))
        _ = m.handle(.stopRequested, now: 0)
        var now = 2 * second
        var actions = m.handle(.tick, now: now)
        XCTAssertEqual(actions, [.cancelDeliveries(refs(1...2)), .interrupt(refs(1...2))])
        actions = m.handle(.finished(refs(1...2).map { record($0, .retry(delay: .zero)) }, interrupted: true), now: now)
        now = failEveryStatementUntilExit(&m, actions, from: now)
        XCTAssertLessThanOrEqual(now, 2 * second + 5 * second + 5 * second)
    }

    func testIdleMachineWithoutWorkSleepsUntilPollOnly() {
        var m = machine()
        _ = m.handle(.tick, now: 0)
        XCTAssertEqual(m.handle(.claimed(started: [], deferred: [], requested: 4), now: 0), [.sleep(untilNanos: second)])
        // No heartbeat is due with nothing in flight, however long it has been.
        XCTAssertEqual(m.handle(.tick, now: 100 * second), [.run(.claim(limit: 4))])
        XCTAssertEqual(
            m.handle(.claimed(started: [], deferred: [], requested: 4), now: 100 * second),
            [.sleep(untilNanos: 101 * second)])
    }

    func testRetryDelayDoublesAndCaps() {
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 1, jitter: 1), 100_000_000)
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 2, jitter: 1), 200_000_000)
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 6, jitter: 1), 3_200_000_000)
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 7, jitter: 1), 5_000_000_000)
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 1000, jitter: 1), 5_000_000_000)
        XCTAssertEqual(ClaimLoopMachine.retryDelay(failures: 1, jitter: 1.25), 125_000_000)
    }
}
