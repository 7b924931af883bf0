import CourierBench
import XCTest

/// The reference workload `courier bench` times to say how fast the machine's cores were.
final class ReferenceWorkloadTests: XCTestCase {
    func testTheWorkloadIsTheSameOnEveryRun() {
        let first = ReferenceWorkload.run(rounds: 2_000)
        XCTAssertEqual(ReferenceWorkload.run(rounds: 2_000), first)
        XCTAssertNotEqual(ReferenceWorkload.run(rounds: 2_001), first, "every round counts in the checksum")
        XCTAssertEqual(ReferenceWorkload.measure(tries: 2).checksum, ReferenceWorkload.run())
    }

    func testItsTimeIsTheCPUOfTheRunningThreadNotTheClock() {
        let measured = ReferenceWorkload.measure(tries: 1).milliseconds
        XCTAssertGreaterThan(measured, 1, "60,000 rounds of allocation, hashing and sorting take milliseconds")
        // A thread sleeping spends no CPU: the time is the thread's, not the wall clock's.
        let before = ReferenceWorkload.threadCPUSeconds()
        Thread.sleep(forTimeInterval: 0.3)
        XCTAssertLessThan(ReferenceWorkload.threadCPUSeconds() - before, 0.1)
    }

    func testTheLineSaysBothTimesAndWhichWayIsFaster() {
        XCTAssertEqual(
            ReferenceWorkload.summary(before: 151.6, after: 163.2),
            "reference workload 152 ms of one core before the scenarios, 163 ms after"
                + " (lower is faster; compare CPU per job between runs whose references are close)")
    }
}
