import CourierCLISupport
import CourierCore
import Foundation

extension BenchRunner {
    /// Bytes of each body in the `bodies` scenario: 1 MiB, the most a job may hold.
    static let largeBodyBytes = 1_048_576

    /// `count` jobs due at once, each with a 1 MiB body of bytes that do not compress (so
    /// PostgreSQL stores and sends all of them), drained by a default worker to one host: the
    /// worker's peak memory says whether bodies follow its body budget or the claim size.
    package func bodies(count: Int) throws -> BenchResult {
        say("bodies: \(Output.count(count)) jobs with 1 MiB bodies to one host...")
        let queue = "bench-bodies"
        try reset(queue)
        try store.setPaused(queue, true)
        var random = SystemRandomNumberGenerator()
        let base = (0..<Self.largeBodyBytes / 8).flatMap { _ in
            withUnsafeBytes(of: random.next() as UInt64) { Array($0) }
        }
        var pieces: [[(Int, NewJob)]] = [[]]
        for n in 1...count {
            var job = NewJob(url: sink.url("/hook"))
            job.queue = queue
            var body = base
            withUnsafeBytes(of: UInt64(n).littleEndian) { body.replaceSubrange(0..<8, with: $0) }
            job.body = body
            job.headers = [("Content-Type", "application/octet-stream")]
            pieces[pieces.count - 1].append((n, job))
            if pieces[pieces.count - 1].count == 50 { pieces.append([]) }
        }
        let report = try store.importJobs(pieces.filter { !$0.isEmpty }, skipInvalid: false)
        guard report.inserted == count else { throw CLIError("bench: enqueued \(report.inserted) of \(count) jobs") }
        pieces = []
        var result = try timeDrain(name: "bodies", queue: queue, jobs: count)
        let mebibytes = Double(count * Self.largeBodyBytes) / 1_048_576
        result.extra["body_bytes"] = Self.largeBodyBytes
        result.detail = String(
            format: "1 MiB bodies, %.0f MiB/s; worker peak RSS %.0f MB", mebibytes / max(result.seconds, 1e-9),
            Double(result.peakRSS ?? 0) / 1_048_576)
        return result
    }
}
