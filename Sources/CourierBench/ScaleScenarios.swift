import ArgumentParser
import CourierCore
import Foundation
import Logging
import Postgres
import CourierCLISupport

/// Flags of the `scale`, `soak` and `scaleout` scenarios of `courier bench`.
package struct ScaleOptions: ParsableArguments {
    package init() {}

    @Option(help: "Scale: finished jobs (each with an attempt row) kept as history.")
    package var history: Int = 5_000_000
    @Option(help: "Scale: jobs due at once, drained with and without the history in each of three rounds.")
    package var due: Int = 200_000
    @Option(name: .customLong("soak-rate"), help: "Soak: jobs enqueued per second.")
    package var soakRate: Int = 3000
    @Option(name: .customLong("soak-duration"), help: "Soak: how long to enqueue.")
    package var soakDuration: String = "10m"
    @Option(name: .customLong("soak-retention"), help: "Soak: the worker's --retention.")
    package var soakRetention: String = "1m"
    @Option(name: .customLong("worker-processes"), help: "Scaleout: comma-separated worker process counts.")
    package var workerProcesses: String = "1,2,4"

    package func validate() throws {
        if history < 0 || history > 100_000_000 { throw CLIError.usage("--history must be between 0 and 100000000") }
        // The scenario times claims of 100 before each drain.
        if due < 100 || due > 10_000_000 { throw CLIError.usage("--due must be between 100 and 10000000") }
        if soakRate < 1 || soakRate > 50_000 { throw CLIError.usage("--soak-rate must be between 1 and 50000") }
        _ = try processCounts()
    }

    package func processCounts() throws -> [Int] {
        let counts = workerProcesses.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !counts.isEmpty, counts.allSatisfy({ ($0 ?? 0) >= 1 && ($0 ?? 0) <= 64 }) else {
            throw CLIError.usage("--worker-processes: give counts between 1 and 64, e.g. 1,2,4")
        }
        return counts.compactMap { $0 }
    }
}

/// The scenarios about months of traffic: a large history (`scale`), retention keeping up with
/// steady traffic (`soak`), and more worker processes against one PostgreSQL (`scaleout`).
extension BenchRunner {
    /// Drains `due` jobs on an empty table and beside `history` finished jobs, in turns: the
    /// empty table lives in a second database on the same server (`BenchStatements.scaleDatabase`),
    /// the history (finished jobs with their attempt rows, loaded by SQL `INSERT ... SELECT`,
    /// not one enqueue per job) in the benchmark's own. After the load come `rounds` rounds of
    /// one drain of each, the order turning every round. This machine's speed swings by half
    /// within minutes, so an empty-table drain run minutes before the history's said more about
    /// those minutes than about the history; each round's two drains share theirs, and the
    /// scenario reports the median of the rounds' ratios. Before each drain the benchmark
    /// vacuums the table (as autovacuum would after the drain's reset and bulk enqueue) and
    /// times 200 claims of 100 (given back at once; after three untimed ones that prepare the
    /// statements on its connection); while the drain runs, it claims (and completes) a batch
    /// of 100 itself every 50 ms or so and times those claims too; after the load it times
    /// `courier.queue_stats`.
    package func scale(history: Int, due: Int, rounds: Int = 3) throws -> [BenchResult] {
        let queue = "bench-scale"
        let historyQueue = "bench-history"
        say("scale: a second database, \(BenchStatements.scaleDatabase), for the drains on an empty table...")
        do {
            for statement in BenchStatements.createScaleDatabase { try connection.simpleQuery(statement.sql) }
        } catch {
            throw CLIError(
                "scale: cannot create database \(BenchStatements.scaleDatabase) beside this one (it needs CREATEDB): \(error)")
        }
        defer { try? connection.simpleQuery(BenchStatements.dropScaleDatabase.sql) }
        let emptyURL = Self.url(databaseURL, database: BenchStatements.scaleDatabase)
        let emptyConnection = try PostgresConnection(emptyURL, applicationName: "courier-bench")
        defer { emptyConnection.close() }
        try Migrator(logger: Logger(label: "courier.bench", factory: { _ in SwiftLogNoOpLogHandler() })).migrate(emptyConnection)
        let emptyTable = BenchRunner(
            databaseURL: emptyURL, connection: emptyConnection, sink: sink, timeout: timeout, worker: worker, loops: loops,
            batchSize: batchSize, concurrency: concurrency, say: say, workerLog: workerLog, payloadBytes: payloadBytes)
        say("scale: loading \(Output.count(history)) finished jobs with their attempt rows...")
        try reset(historyQueue)
        let loadStarted = Date()
        let chunk = 250_000
        var loaded = 0
        // Finished over the last 6 days: inside the default 7-day retention, so the drain's worker
        // keeps them all (and still looks for old ones on every maintenance pass).
        let span = 6.0 * 86_400
        let step = history > 0 ? span * 1000 / Double(history) : 0
        while loaded < history {
            let n = min(chunk, history - loaded)
            try connection.run(
                BenchStatements.loadFinished,
                .init(queue: historyQueue, url: sink.url("/hook"), body: BenchRunner.payload(loaded), count: n,
                      firstAgo: .seconds(span - Double(loaded) * step / 1000), step: .milliseconds(step)))
            loaded += n
            say("  \(Output.count(loaded)) loaded (\(Int(Double(loaded) / Date().timeIntervalSince(loadStarted)))/s)")
        }
        let loadSeconds = Date().timeIntervalSince(loadStarted)
        for statement in BenchStatements.settleHistory { try connection.run(statement) }
        // History accumulates over days, long since written out: flush the gigabytes the load
        // just dirtied, so the drain does not share the disk with their first write (needs a
        // superuser or pg_checkpoint; without it the drain pays for that write too).
        try? connection.simpleQuery(BenchStatements.checkpoint.sql)
        let statsTimes = try timeStatement(BenchStatements.queueStats, times: 20)
        let oldStatsTimes = try timeStatement(BenchStatements.countEveryRow, times: 3)
        var empties: [BenchResult] = []
        var fulls: [BenchResult] = []
        for round in 0..<rounds {
            say("scale: round \(round + 1) of \(rounds): \(Output.count(due)) jobs drained on the empty table and beside "
                + "the history...")
            for emptyTurn in round % 2 == 0 ? [true, false] : [false, true] {
                if emptyTurn {
                    empties.append(try emptyTable.scaleDrain(name: "scale-empty", queue: queue, due: due))
                } else {
                    fulls.append(try scaleDrain(name: "scale", queue: queue, due: due, queueStatsWhileDue: true))
                }
            }
        }
        try reset(queue)
        let ratios = zip(fulls, empties).map { $0.rate / max($1.rate, 1e-9) }
        let fraction = ratios.sorted()[ratios.count / 2]
        func median(_ results: [BenchResult]) -> BenchResult { results.sorted { $0.rate < $1.rate }[results.count / 2] }
        func rates(_ results: [BenchResult]) -> String { results.map { Output.count(Int($0.rate)) }.joined(separator: ", ") }
        func serverCPU(_ results: [BenchResult]) -> String {
            results.map { ($0.extra["server_cpu_seconds_per_1000_jobs"] as? Double).map { String(format: "%.3f", $0) } ?? "-" }
                .joined(separator: ", ")
        }
        let empty = median(empties)
        var full = median(fulls)
        let sizes = try connection.run(BenchStatements.soakSample, (queue: historyQueue, staleAfter: .zero))[0]
        let bytes = try (0..<4).map { try sizes.decode($0, as: Int.self) }.reduce(0, +)
        full.detail += String(
            format: "; %.0f%% of empty (median of the rounds: %@); rounds beside the history %@, empty %@ jobs/s; PG CPU s/1K beside the history %@, empty %@; history %@ rows, %.1f GB, loaded %.0f/s; queue_stats p50 %.1f max %.1f ms (count(*) per state: %.0f ms)",
            fraction * 100, ratios.map { String(format: "%.0f%%", $0 * 100) }.joined(separator: ", "), rates(fulls),
            rates(empties), serverCPU(fulls), serverCPU(empties), Output.count(history), Double(bytes) / 1e9,
            Double(history) / loadSeconds,
            percentile(statsTimes, 0.5), statsTimes.max() ?? 0, percentile(oldStatsTimes, 0.5))
        full.extra["history_rows"] = history
        full.extra["history_bytes"] = bytes
        full.extra["history_load_rows_per_second"] = (Double(history) / loadSeconds).rounded()
        full.extra["drain_fraction_of_empty"] = (fraction * 1000).rounded() / 1000
        full.extra["drain_fraction_of_empty_rounds"] = ratios.map { ($0 * 1000).rounded() / 1000 }
        full.extra["queue_stats_ms_p50"] = rounded(percentile(statsTimes, 0.5))
        full.extra["queue_stats_ms_max"] = rounded(statsTimes.max() ?? 0)
        full.extra["count_every_row_ms"] = rounded(percentile(oldStatsTimes, 0.5))
        return [empty, full]
    }

    /// `url` with database `name`: a `dbname` parameter added to a URI, a `dbname=` pair to a
    /// keyword string. libpq takes the last value it reads, so it replaces the one given.
    static func url(_ url: String, database name: String) -> String {
        guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else { return url + " dbname=\(name)" }
        return url + (url.contains("?") ? "&" : "?") + "dbname=\(name)"
    }

    /// One drain of the scale scenario: `due` jobs bulk-enqueued into a paused queue, one worker,
    /// and claim probes from the benchmark while it runs.
    private func scaleDrain(name: String, queue: String, due: Int, queueStatsWhileDue: Bool = false) throws -> BenchResult {
        let store = AdminStore(connection: connection)
        try reset(queue)
        try store.setPaused(queue, true)
        _ = try store.importJobs(makeJobs(due, path: "/hook", queue: queue), skipInvalid: false)
        // The reset just deleted the previous drain's jobs (500,000 dead rows in the full
        // scenario, the benchmark's own doing, not history) and the new jobs' pages are not yet
        // all-visible. Autovacuum would settle both within a minute of such a change (its
        // threshold on courier.jobs is 2 % of the table); a backlog that waits is in that
        // state. Only analyzing here left the timed claims to read a table no deployment keeps:
        // claim p50 3.1 to 3.3 ms that way, 2.8 to 3.3 ms once vacuumed (docs/scaling.md).
        try connection.simpleQuery(BenchStatements.settleJobs.sql)
        var statsWhileDue: [Double] = []
        if queueStatsWhileDue { statsWhileDue = try timeStatement(BenchStatements.queueStats, times: 20) }
        let probe = try PostgresConnection(databaseURL, applicationName: "courier-bench-probe")
        defer { probe.close() }
        let probeStore = JobStore(connection: probe, workerID: "bench-probe")
        // The claim alone, before the worker starts: 200 claims of 100 jobs, each given back at
        // once, so the figure is the database's work on a machine that is not also draining.
        // Three claims first, not timed: the first prepares the claim's statements on this new
        // connection, which a worker does once per connection, not once per claim.
        try store.setPaused(queue, false)
        for _ in 0..<3 {
            let claimed = try probeStore.claim(queues: [queue], limit: 100, lease: .seconds(60))
            try probeStore.release(claimed.map { ($0.id, $0.attempt) }, delay: .zero)
        }
        var quietClaims: [Double] = []
        for _ in 0..<200 {
            let t0 = DispatchTime.now().uptimeNanoseconds
            let claimed = try probeStore.claim(queues: [queue], limit: 100, lease: .seconds(60))
            quietClaims.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6)
            guard claimed.count == 100 else { throw CLIError("scale: a probe claimed \(claimed.count) of 100 due jobs") }
            try probeStore.release(claimed.map { ($0.id, $0.attempt) }, delay: .zero)
        }
        try store.setPaused(queue, true)
        let process = try startWorker(queue: queue)
        defer { process.stop() }
        let server = self.server
        let serverBefore = server?.seconds
        let before = process.stats
        let started = Date()
        try store.setPaused(queue, false)
        _ = try connection.run(BenchStatements.wake, queue)
        var claimTimes: [Double] = []
        var lastProbe = Date.distantPast
        let finished = try waitForSucceeded(queue, count: due, started: started, sample: {
            guard Date().timeIntervalSince(lastProbe) >= 0.05 else { return }
            lastProbe = Date()
            let t0 = DispatchTime.now().uptimeNanoseconds
            guard let claimed = try? probeStore.claim(queues: [queue], limit: 100, lease: .seconds(60)) else { return }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6
            guard !claimed.isEmpty else { return }
            claimTimes.append(elapsed)
            let now = Date()
            _ = try? probeStore.recordOutcomes(claimed.map {
                AttemptRecord(jobID: $0.id, attempt: $0.attempt, transition: .succeed, delivery: .delivered(),
                              startedAt: now, finishedAt: now)
            })
        })
        let after = process.stats
        let serverAfter = server?.seconds
        let seconds = finished.timeIntervalSince(started)
        var result = BenchResult(
            name: name, jobs: due, seconds: seconds, cpuPerThousand: cpuPerThousand(before, after, jobs: due),
            peakRSS: after?.peakRSS,
            detail: String(format: "claim of 100 alone p50 %.2f p99 %.2f ms, during the drain p50 %.2f p99 %.2f ms",
                           percentile(quietClaims, 0.5), percentile(quietClaims, 0.99),
                           percentile(claimTimes, 0.5), percentile(claimTimes, 0.99)))
        if !statsWhileDue.isEmpty {
            result.detail += String(format: "; queue_stats with %@ due p50 %.1f ms", Output.count(due), percentile(statsWhileDue, 0.5))
            result.extra["queue_stats_with_due_ms_p50"] = rounded(percentile(statsWhileDue, 0.5))
        }
        // The whole server's, so with the probes' claims, as in every drain of this scenario.
        result.extra["server_cpu_seconds_per_1000_jobs"] = Output.orNull(serverPerThousand(serverBefore, serverAfter, jobs: due))
        result.extra["claim_alone_ms_p50"] = rounded(percentile(quietClaims, 0.5))
        result.extra["claim_alone_ms_p99"] = rounded(percentile(quietClaims, 0.99))
        result.extra["claim_during_drain_ms_p50"] = rounded(percentile(claimTimes, 0.5))
        result.extra["claim_during_drain_ms_p99"] = rounded(percentile(claimTimes, 0.99))
        result.extra["claim_probes_during_drain"] = claimTimes.count
        return result
    }

    /// Enqueues `rate` jobs per second for `seconds` into a worker whose `--retention` is
    /// `retention`, printing every 30 s the sizes of the jobs and attempts tables and their
    /// indexes, the enqueue and removal rates, and the stale rows (succeeded longer ago than the
    /// retention). After the traffic: waits until every job is delivered, reports the stale rows
    /// 30 s later, then writes a backlog of stale jobs at once and times how fast the worker
    /// removes it: its removal capacity, against the enqueue rate.
    package func soak(rate: Int, seconds: Double, retention: Double) throws -> BenchResult {
        let queue = "bench-soak"
        say("soak: \(Output.count(rate)) jobs/s for \(Output.duration(seconds)), worker --retention \(Output.duration(retention))...")
        try reset(queue)
        // The worker's --retention applies: no setting of the queue from an earlier run.
        var keep = QueueRetentionChange()
        keep.keepSucceeded = .some(nil)
        try AdminStore(connection: connection).updateRetention(queue, keep)
        let process = try startWorker(queue: queue, extra: ["--retention", "\(Int(retention * 1000))ms"])
        defer { process.stop() }
        let before = process.stats
        let url = sink.url("/hook")
        let body = BenchRunner.payload(0)
        let tick = 0.1
        let perTick = Double(rate) * tick
        var enqueued = 0
        var samples: [(at: Double, bytes: Int)] = []
        var lastSample = (at: 0.0, enqueued: 0, rows: 0)
        let started = Date()
        let widths = [7, 9, 9, 9, 9, 9, 9, 8, 8, 8]
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { String(repeating: " ", count: max(0, $1 - $0.count)) + $0 }.joined(separator: " ")
        }
        say(line(["TIME", "JOBS", "JOBS IDX", "ATTEMPTS", "ATT IDX", "TOTAL", "ROWS", "IN/S", "OUT/S", "STALE"]))
        func sample(_ at: Double) throws {
            let row = try connection.run(BenchStatements.soakSample, (queue: queue, staleAfter: .seconds(retention)))[0]
            let sizes = try (0..<4).map { try row.decode($0, as: Int.self) }
            let rows: Int = try row.decode(4)
            let stale: Int = try row.decode(5)
            let span = max(at - lastSample.at, 1e-9)
            let added = enqueued - lastSample.enqueued
            let removed = lastSample.rows + added - rows
            samples.append((at, sizes.reduce(0, +)))
            say(line([
                "\(Int(at))s", mb(sizes[0]), mb(sizes[1]), mb(sizes[2]), mb(sizes[3]), mb(sizes.reduce(0, +)),
                Output.count(rows), Output.count(Int(Double(added) / span)), Output.count(Int(Double(removed) / span)),
                Output.count(stale),
            ]))
            lastSample = (at, enqueued, rows)
        }
        var nextSample = 30.0
        while true {
            let elapsed = Date().timeIntervalSince(started)
            if elapsed >= seconds { break }
            let target = Int(min(elapsed + tick, seconds) / tick * perTick)
            if target > enqueued {
                let n: Int = try connection.run(BenchStatements.enqueueMany, (url: url, body: body, queue: queue, count: target - enqueued))[0].decode(0)
                enqueued += n
            }
            if elapsed >= nextSample {
                try sample(elapsed)
                nextSample += 30
            }
            let wait = Double(Int(elapsed / tick) + 1) * tick - Date().timeIntervalSince(started)
            if wait > 0 { Thread.sleep(forTimeInterval: wait) }
        }
        let trafficSeconds = Date().timeIntervalSince(started)
        guard process.isRunning else { throw CLIError("soak: the worker exited during the run") }
        // Every job delivered: nothing left waiting or running.
        while true {
            let unfinished: Int = try connection.run(BenchStatements.unfinishedCount, queue)[0].decode(0)
            if unfinished <= 0 { break }
            if Date().timeIntervalSince(started) > trafficSeconds + timeout {
                throw CLIError("soak: jobs still unfinished \(Output.duration(timeout)) after the traffic stopped")
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        let deliveredAt = Date().timeIntervalSince(started)
        let notSucceeded: Int = try connection.run(BenchStatements.notSucceeded, queue)[0].decode(0)
        let after = process.stats
        let stopWait = trafficSeconds + 30 - Date().timeIntervalSince(started)
        if stopWait > 0 { Thread.sleep(forTimeInterval: stopWait) }
        let staleAfter30: Int = try connection.run(BenchStatements.soakSample, (queue: queue, staleAfter: .seconds(retention)))[0].decode(5)
        try sample(Date().timeIntervalSince(started))

        // Capacity: a backlog of stale jobs (30 s of traffic, at least 50,000, with their attempt
        // rows) appears at once in a queue of its own (retention covers every queue, and the soak
        // queue's last jobs leave only as they age); the clock starts at the first poll that finds
        // some of it gone (the worker's next pass comes within 5 s) and stops when none is left.
        let backlogQueue = queue + "-backlog"
        try reset(backlogQueue)
        let backlog = max(50_000, rate * 30)
        var loaded = 0
        while loaded < backlog {
            let n = min(250_000, backlog - loaded)
            try connection.run(
                BenchStatements.loadFinished,
                .init(queue: backlogQueue, url: url, body: body, count: n, firstAgo: .hours(30 * 24),
                      step: .microseconds(1)))
            loaded += n
        }
        let removalStarted = Date()
        var first: (at: Date, rows: Int)?
        var capacity = 0.0
        while true {
            let rows: Int = try connection.run(BenchStatements.queueJobs, backlogQueue)[0].decode(0)
            if first == nil && rows < backlog { first = (Date(), rows) }
            if rows == 0, let first {
                capacity = Double(first.rows) / max(Date().timeIntervalSince(first.at), 1e-9)
                break
            }
            if Date().timeIntervalSince(removalStarted) > timeout { throw CLIError("soak: retention did not remove the backlog") }
            Thread.sleep(forTimeInterval: 0.01)
        }
        let window = samples.filter { $0.at >= trafficSeconds - 300 && $0.at <= trafficSeconds }.map { Double($0.bytes) }
        let mean = window.isEmpty ? 0 : window.reduce(0, +) / Double(window.count)
        let spread = mean > 0 ? ((window.max() ?? 0) - (window.min() ?? 0)) / 2 / mean : 0
        let offered = Double(enqueued) / trafficSeconds
        var result = BenchResult(
            name: "soak", jobs: enqueued, seconds: trafficSeconds, cpuPerThousand: cpuPerThousand(before, after, jobs: enqueued),
            peakRSS: after?.peakRSS,
            detail: String(
                format: "all delivered %.0f s after traffic (%d not succeeded); size over last 5 min ±%.0f%% of %@; "
                    + "stale 30 s after traffic %@; removal capacity %@/s = %.1f× enqueue",
                deliveredAt - trafficSeconds, notSucceeded, spread * 100, mb(Int(mean)), Output.count(staleAfter30),
                Output.count(Int(capacity)), capacity / max(offered, 1e-9)))
        result.extra["delivered_seconds_after_traffic"] = rounded(deliveredAt - trafficSeconds)
        result.extra["not_succeeded"] = notSucceeded
        result.extra["size_spread_last_5_minutes"] = (spread * 1000).rounded() / 1000
        result.extra["stale_30s_after_traffic"] = staleAfter30
        result.extra["removal_capacity_per_second"] = capacity.rounded()
        result.extra["removal_capacity_over_enqueue"] = (capacity / max(offered, 1e-9) * 100).rounded() / 100
        return result
    }

    /// The drain of `jobs` jobs by 1, 2, 4... `courier worker` processes of the benchmark's
    /// settings, against the one PostgreSQL: where the database becomes the limit.
    package func scaleout(jobs: Int, processes counts: [Int]) throws -> [BenchResult] {
        let queue = "bench-scaleout"
        var results: [BenchResult] = []
        let store = AdminStore(connection: connection)
        for count in counts {
            say("scaleout: \(Output.count(jobs)) jobs, \(count) worker process\(count == 1 ? "" : "es")...")
            try reset(queue)
            try store.setPaused(queue, true)
            _ = try store.importJobs(makeJobs(jobs, path: "/hook", queue: queue), skipInvalid: false)
            let processes = try (0..<count).map { _ in try startWorker(queue: queue) }
            defer { processes.forEach { $0.stop() } }
            let before = processes.map(\.stats)
            let started = Date()
            try store.setPaused(queue, false)
            _ = try connection.run(BenchStatements.wake, queue)
            let finished = try waitForSucceeded(queue, count: jobs, started: started)
            let after = processes.map(\.stats)
            let cpu = zip(before, after).reduce(0.0) { sum, pair in
                sum + (pair.1?.cpuSeconds ?? 0) - (pair.0?.cpuSeconds ?? 0)
            }
            results.append(BenchResult(
                name: "scaleout-\(count)", jobs: jobs, seconds: finished.timeIntervalSince(started),
                cpuPerThousand: cpu / Double(jobs) * 1000, peakRSS: after.compactMap { $0?.peakRSS }.max(),
                detail: "\(count) worker process\(count == 1 ? "" : "es"), one PostgreSQL (CPU: all workers)"))
        }
        return results
    }

    /// Runs `sql` `times` times and returns each duration in milliseconds.
    private func timeStatement(_ statement: Statement<Void>, times: Int) throws -> [Double] {
        try (0..<times).map { _ in
            let t0 = DispatchTime.now().uptimeNanoseconds
            try connection.run(statement)
            return Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6
        }
    }
}

/// The `q` quantile of `values` (nearest rank; 0 when empty).
private func percentile(_ values: [Double], _ q: Double) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int((q * Double(sorted.count - 1)).rounded()))]
}

private func rounded(_ value: Double) -> Double { (value * 100).rounded() / 100 }

private func mb(_ bytes: Int) -> String { String(format: "%.0f MB", Double(bytes) / 1_048_576) }
