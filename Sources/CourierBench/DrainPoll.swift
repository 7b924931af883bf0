/// How often the benchmark asks PostgreSQL whether a drain is over.
///
/// The answer costs a server process CPU on the machine under test: asked every 10 ms through a
/// 10 s drain, 0.3 ms per question and about 5 µs per delivered job (`pg_stat_statements`, a
/// 50,000-job drain), 3 % of a core taken from the worker and its backend (though never counted
/// in the PostgreSQL column: `ServerCPU` leaves the benchmark's own session out). So the wait
/// follows what is left: a quarter of the time the unfinished jobs need at the rate so far,
/// never more than `longest`, and `shortest` near the end and before the first job finished, so
/// the end of a drain is still seen within `shortest` of when it happened.
package enum DrainPoll {
    /// The wait near the end of a drain, and before the first job finished.
    package static let shortest = 0.01
    /// The longest wait, whatever is left.
    package static let longest = 0.1

    /// Seconds to wait before asking again, with `unfinished` of `total` jobs left
    /// `elapsed` seconds into the drain.
    package static func delay(unfinished: Int, total: Int, elapsed: Double) -> Double {
        let finished = total - unfinished
        guard unfinished > 0, finished > 0, elapsed > 0 else { return shortest }
        let left = Double(unfinished) * elapsed / Double(finished)
        return min(longest, max(shortest, left / 4))
    }
}
