import CourierModel
import Foundation

/// A fixed piece of single-threaded work, timed in CPU time of the thread that runs it, so a
/// run's figures can be read against the speed the machine's cores had that day.
///
/// The CPU per job that `courier bench` reports is time, not instructions: on a virtual machine
/// whose cores run at half speed (a busy host, another tenant) every microsecond figure about
/// doubles while the work done stays the same. The workload is the kind of work a delivery is
/// made of (small allocations, reference counting, hashing strings, sorting, branches), the same
/// on every run, so its time moves with the cores and not with Courier. The cores also change
/// speed from one second to the next, so it gauges large differences (a day at half speed), not
/// small ones: five drains in a row gave references of 80–93 ms and worker CPU per job of
/// 106–121 µs with no order between the two.
package enum ReferenceWorkload {
    /// Rounds of one run: about a tenth of a second on the 2-core AMD EPYC machine the figures
    /// of docs/benchmarks.md come from.
    package static let rounds = 60_000

    /// Runs the workload once and returns its checksum, which depends on every step (so none is
    /// left out by the optimizer) and is the same on every run.
    package static func run(rounds: Int = rounds) -> UInt64 {
        var random = SplitMix64(seed: 0x5EED)
        var counts: [String: Int] = [:]
        var checksum: UInt64 = 0
        for _ in 0..<rounds {
            let key = "h\(random.next() % 4096).example.com"
            counts[key, default: 0] += 1
            var numbers: [UInt64] = []
            numbers.reserveCapacity(32)
            for _ in 0..<32 { numbers.append(random.next() >> 40) }
            numbers.sort()
            checksum = checksum &* 31 &+ numbers[16] &+ UInt64(counts[key] ?? 0) &+ UInt64(key.utf8.count)
        }
        return checksum &+ UInt64(counts.count)
    }

    /// The median of `tries` runs, in milliseconds of this thread's CPU time, with the runs'
    /// checksum. The cores of a virtual machine change speed from one second to the next (a
    /// loop of plain arithmetic took 181 to 264 ms in ten runs on an idle machine), so one run
    /// says little; the median of several neither picks the luckiest second nor the worst.
    package static func measure(tries: Int = 5) -> (milliseconds: Double, checksum: UInt64) {
        var times: [Double] = []
        var checksum: UInt64 = 0
        for _ in 0..<max(tries, 1) {
            let start = threadCPUSeconds()
            checksum = run()
            times.append((threadCPUSeconds() - start) * 1000)
        }
        times.sort()
        return (times[times.count / 2], checksum)
    }

    /// The line `courier bench` prints: the reference's time before and after the scenarios.
    package static func summary(before: Double, after: Double) -> String {
        String(format: "reference workload %.0f ms of one core before the scenarios, %.0f ms after", before, after)
            + " (lower is faster; compare CPU per job between runs whose references are close)"
    }

    /// CPU seconds the calling thread has run.
    package static func threadCPUSeconds() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1_000_000_000
    }
}
