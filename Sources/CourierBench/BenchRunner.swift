import CourierCore
import CourierSink
import CourierWorker
import Foundation
import Logging
import Postgres
import CourierCLISupport

#if canImport(Glibc)
    import Glibc
#endif

/// The benchmark's HTTP endpoint: the built-in sink, or an external URL.
///
/// Built-in paths: `/hook` answers 200; `/flaky` answers 503 to the first attempt of 30% of
/// jobs (chosen by job id) and 200 otherwise; `/slow` answers 200 after one second, `/hold5`
/// after five; `/fail` answers 500.
///
/// With `--sink-url` the URL is used exactly as given: every request of the scenarios that
/// need one path (drain, latency, ceilings, scale, soak, web, webhooks, scaleout) goes to it;
/// the scenarios that need the built-in paths or host names are skipped.
package final class BenchSink {
    package let baseURL: String
    /// The URL given with `--sink-url`, used as it is; nil for the built-in sink.
    package let external: String?
    private let sink: HTTPSink?

    private init(baseURL: String, external: String?, sink: HTTPSink?) {
        self.baseURL = baseURL
        self.external = external
        self.sink = sink
    }

    /// The URL of built-in path `path` (`/hook`, `/hook?endpoint=3`): the external URL as
    /// given (with the query of `path` added, if any), else the built-in sink's path.
    package func url(_ path: String) -> String {
        guard let external else { return baseURL + path }
        guard let query = path.split(separator: "?", maxSplits: 1).dropFirst().first else { return external }
        return external + (external.contains("?") ? "&" : "?") + query
    }

    package static func start(external: String?) throws -> BenchSink {
        if let external {
            return BenchSink(
                baseURL: external.hasSuffix("/") ? String(external.dropLast()) : external, external: external, sink: nil)
        }
        let ok: [UInt8] = Array(#"{"ok":true}"#.utf8)
        let sink = try blockingAwait {
            try await HTTPSink.start(immediate: { request in
                switch request.path {
                case "/flaky":
                    let id = Int(request.header("courier-job-id") ?? "") ?? 0
                    if request.header("courier-attempt") == "1" && (id &* 2_654_435_761) % 100 < 30 {
                        return .respond(status: 503, body: Array("busy\n".utf8))
                    }
                    return .respond(status: 200, body: ok)
                case "/slow":
                    return .delayed(seconds: 1, status: 200, body: ok)
                case "/hold5":
                    return .delayed(seconds: 5, status: 200, body: ok)
                case "/fail":
                    return .respond(status: 500, body: Array("broken\n".utf8))
                default:
                    return .respond(status: 200, body: ok)
                }
            })
        }
        return BenchSink(baseURL: sink.baseURL, external: nil, sink: sink)
    }

    package func shutdown() {
        if let sink { _ = try? blockingAwait { await sink.shutdown() } }
    }
}

/// Runs the scenarios of `courier bench`.
package struct BenchRunner {
    package let databaseURL: String
    package let connection: PostgresConnection
    package let sink: BenchSink
    package let timeout: Double
    /// Flags every benchmark worker gets.
    package let worker: [String]
    package let loops: Int
    package let batchSize: Int
    package let concurrency: Int
    package let say: (String) -> Void
    /// Where benchmark workers write their standard error: a file the command removes when it
    /// ends (`TemporaryFile`), read back when a worker exits at start.
    package let workerLog: String
    /// The size in bytes of each job's body (`--payload-bytes`; not the `bodies` scenario's, nor
    /// the finished jobs loaded as history); 0 for the small event of `payload(_:)`, ~200 bytes.
    package var payloadBytes: Int = 0

    var store: AdminStore { AdminStore(connection: connection) }

    /// The database cluster's CPU, when it runs on this machine and its data directory can be
    /// read (the throwaway cluster always; a `--database-url` server usually not), without the
    /// server process of this runner's own connection, whose polls are the benchmark's cost.
    var server: ServerCPU? {
        guard let directory: String = try? connection.run(BenchStatements.dataDirectory)[0].decode(0) else { return nil }
        let observer: Int32? = try? connection.run(BenchStatements.backendPID)[0].decode(0)
        return ServerCPU(dataDirectory: directory, observer: observer)
    }

    /// A ~200-byte JSON event; with `bytes` larger than that, the same event with a `"note"`
    /// of letters that makes it exactly `bytes` long (still one JSON object), as a webhook
    /// carrying a larger document would be.
    package static func payload(_ n: Int, bytes: Int = 0) -> [UInt8] {
        let text = #"{"type":"invoice.paid","id":"evt_\#(String(format: "%010d", n))","created":1764000000,"#
            + #""data":{"invoice":"in_1Q2w3E4r5T6y7U8i","customer":"cus_9O8i7U6y5T4r","amount_due":4200,"currency":"eur","status":"paid"}}"#
        var event = Array(text.utf8)
        let noteFrame = Array(#","note":""#.utf8), end = Array(#""}"#.utf8)
        guard bytes >= event.count + noteFrame.count + end.count - 1 else { return event }
        // `..."}` + `,"note":"<letters>"}`: the event's closing brace moves after the note.
        event.removeLast()
        let letters = bytes - event.count - noteFrame.count - end.count
        event += noteFrame
        event += (0..<letters).map { UInt8(ascii: "a") + UInt8((($0 &+ n) % 26 + 26) % 26) }
        event += end
        return event
    }

    /// Job `n`'s body at this run's `payloadBytes`.
    package func payload(_ n: Int) -> [UInt8] { Self.payload(n, bytes: payloadBytes) }

    /// `count` jobs for `path` on the sink; with `hosts`, job n goes to host name
    /// `h<n % hosts>.localhost` on the sink's port (the worker resolves them with --resolve).
    package func makeJobs(
        _ count: Int, path: String, queue: String, retrySchedule: [Double]? = nil, hosts: Int? = nil,
        base: String? = nil
    ) -> [[(Int, NewJob)]] {
        var pieces: [[(Int, NewJob)]] = []
        var piece: [(Int, NewJob)] = []
        for n in 1...count {
            var job = NewJob(url: base.map { $0 + path } ?? hosts.map { hostURL(n % $0) + path } ?? sink.url(path))
            job.queue = queue
            job.body = payload(n)
            job.headers = [("Content-Type", "application/json")]
            job.retrySchedule = retrySchedule?.map(Duration.seconds)
            piece.append((n, job))
            if piece.count == 10_000 {
                pieces.append(piece)
                piece = []
            }
        }
        if !piece.isEmpty { pieces.append(piece) }
        return pieces
    }

    /// Clears a scenario's queue so reruns against the same database start empty.
    package func reset(_ queue: String) throws {
        _ = try connection.run(BenchStatements.resetQueue, queue)
    }

    /// The sink under host name `h<n>.localhost`.
    package func hostURL(_ n: Int) -> String {
        let port = URLComponents(string: sink.baseURL)?.port ?? 80
        return "http://h\(n).localhost:\(port)"
    }

    /// Worker flags that send every `*.localhost` name to the sink.
    package static let resolveLocalhost = ["--resolve", "*.localhost=127.0.0.1"]

    package func startWorker(queue: String, extra: [String] = []) throws -> WorkerProcess {
        let log = workerLog
        let process = try WorkerProcess(
            arguments: ["--database-url", databaseURL, "--queues", queue] + worker + extra, logPath: log)
        // Give it time to connect and LISTEN before the clock starts.
        Thread.sleep(forTimeInterval: 1.0)
        guard process.isRunning else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw CLIError("the benchmark worker exited at start: \(text.split(separator: "\n").last.map(String.init) ?? "no output")")
        }
        return process
    }

    /// Waits until `count` jobs of `queue` succeeded; returns when, or throws after the timeout.
    /// Asks as often as `DrainPoll` says, or every 10 ms for a scenario that samples meanwhile.
    package func waitForSucceeded(_ queue: String, count: Int, started: Date, sample: (() -> Void)? = nil) throws -> Date {
        while true {
            let unfinished: Int = try connection.run(BenchStatements.unfinishedCount, queue)[0].decode(0)
            if unfinished <= 0 {
                let finished = Date()
                let done: Int = try connection.run(BenchStatements.succeededCount, queue)[0].decode(0)
                guard done == count else {
                    throw CLIError("benchmark queue \(queue): \(count - done) of \(count) jobs did not succeed")
                }
                return finished
            }
            if Date().timeIntervalSince(started) > timeout {
                throw CLIError("benchmark queue \(queue): jobs still unfinished after \(Output.duration(timeout))")
            }
            if let sample {
                sample()
                Thread.sleep(forTimeInterval: DrainPoll.shortest)
            } else {
                Thread.sleep(forTimeInterval: DrainPoll.delay(
                    unfinished: unfinished, total: count, elapsed: Date().timeIntervalSince(started)))
            }
        }
    }

    /// Bulk-enqueues into a paused queue (with `settle`, then vacuums and analyzes the jobs, as
    /// autovacuum would soon), starts the worker, resumes, and times the drain. `base` sends
    /// every job to that origin instead of the sink.
    func drainLike(name: String, queue: String, jobs: Int, path: String, retrySchedule: [Double]?,
                           extraWorker: [String] = [], hosts: Int? = nil, base: String? = nil, settle: Bool = false,
                           sample: ((WorkerProcess) -> Void)? = nil) throws -> (BenchResult, Double) {
        try reset(queue)
        try store.setPaused(queue, true)
        let pieces = makeJobs(jobs, path: path, queue: queue, retrySchedule: retrySchedule, hosts: hosts, base: base)
        let enqueueStart = Date()
        let report = try store.importJobs(pieces, skipInvalid: false)
        let enqueueSeconds = Date().timeIntervalSince(enqueueStart)
        guard report.inserted == jobs else { throw CLIError("bench: enqueued \(report.inserted) of \(jobs) jobs") }
        if settle { try connection.simpleQuery(BenchStatements.settleJobs.sql) }
        var result = try timeDrain(name: name, queue: queue, jobs: jobs, extraWorker: extraWorker, sample: sample)
        result.extra["enqueue_seconds"] = (enqueueSeconds * 1000).rounded() / 1000
        result.extra["enqueue_jobs_per_second"] = (Double(jobs) / enqueueSeconds).rounded()
        return (result, enqueueSeconds)
    }

    /// Starts a worker for paused queue `queue`, which holds `jobs` due jobs, resumes the queue
    /// and times the drain: the worker's CPU and peak memory, the database's CPU, the attempts
    /// and the worker's claim counters.
    func timeDrain(name: String, queue: String, jobs: Int, extraWorker: [String] = [],
                   sample: ((WorkerProcess) -> Void)? = nil) throws -> BenchResult {
        let metricsPort = (try? ThrowawayCluster.freePort()) ?? 0
        let process = try startWorker(queue: queue, extra: extraWorker + ["--metrics-port", String(metricsPort)])
        defer { process.stop() }
        let server = self.server
        let serverBefore = server?.seconds
        let before = process.stats
        let started = Date()
        try store.setPaused(queue, false)
        _ = try connection.run(BenchStatements.wake, queue)
        let finished = try waitForSucceeded(queue, count: jobs, started: started, sample: sample.map { f in { f(process) } })
        let after = process.stats
        let serverAfter = server?.seconds
        let counters = BenchMetrics.scrape(port: metricsPort)
        let seconds = finished.timeIntervalSince(started)
        let cpu = cpuPerThousand(before, after, jobs: jobs)
        let attempts: Int = try connection.run(BenchStatements.attemptCount, queue)[0].decode(0)
        var result = BenchResult(name: name, jobs: jobs, seconds: seconds, cpuPerThousand: cpu, peakRSS: after?.peakRSS, detail: "")
        result.extra["attempts"] = attempts
        result.extra["server_cpu_seconds_per_1000_jobs"] = Output.orNull(serverPerThousand(serverBefore, serverAfter, jobs: jobs))
        if let claimed = counters["courier_jobs_claimed_total"], let claims = counters["courier_claims_total"] {
            result.extra["claimed_per_delivery"] = (claimed / Double(attempts) * 1000).rounded() / 1000
            result.extra["claims"] = Int(claims)
            result.extra["deferred"] = Int(counters["courier_jobs_deferred_total"] ?? 0)
        }
        return result
    }

    /// The jobs claimed per delivery and claim statements, as the detail column shows them.
    static func claimDetail(_ result: BenchResult) -> String {
        guard let perDelivery = result.extra["claimed_per_delivery"] as? Double,
            let claims = result.extra["claims"] as? Int
        else { return "claims not scraped" }
        return String(format: "%.3f claimed per delivery, %@ claims", perDelivery, Output.count(claims))
    }

    /// One fast host; `perHostLimit` nil runs the worker with its default.
    package func drain(jobs: Int, perHostLimit: Int? = nil) throws -> BenchResult {
        let name = perHostLimit.map { "drain-limit\($0)" } ?? "drain"
        say("\(name): \(Output.count(jobs)) jobs to one host...")
        var (result, enqueueSeconds) = try drainLike(
            name: name, queue: "bench-\(name)", jobs: jobs, path: "/hook", retrySchedule: nil,
            extraWorker: perHostLimit.map { ["--per-host-limit", String($0)] } ?? [])
        result.detail = "bulk enqueue \(Output.count(Int(Double(jobs) / enqueueSeconds)))/s; \(Self.claimDetail(result))"
        return result
    }

    /// The jobs spread over `hosts` host names, all on the sink.
    package func fanout(jobs: Int, hosts: Int) throws -> BenchResult {
        say("fanout: \(Output.count(jobs)) jobs over \(Output.count(hosts)) hosts...")
        var (result, _) = try drainLike(
            name: "fanout", queue: "bench-fanout", jobs: jobs, path: "/hook", retrySchedule: nil,
            extraWorker: Self.resolveLocalhost, hosts: hosts)
        result.extra["hosts"] = hosts
        result.detail = "\(Output.count(hosts)) hosts; \(Self.claimDetail(result))"
        return result
    }

    /// Jobs at `rate` per second to 20 healthy hosts for `seconds`, first alone, then with as
    /// many again to a host that answers 500 to everything: the healthy hosts' enqueue->start
    /// latency in both runs, and what the failing host cost.
    package func failingHost(rate: Int, seconds: Double) throws -> BenchResult {
        let healthyQueue = "bench-fh-healthy"
        let failingQueue = "bench-fh-failing"
        let count = max(1, Int(Double(rate) * seconds))
        say("failing-host: \(Output.count(count)) jobs at \(rate)/s to 20 healthy hosts, without and with a failing host...")
        try reset(failingQueue)
        try connection.run(BenchStatements.resetDestination, "failing.localhost")
        let process = try startWorker(queue: "\(healthyQueue),\(failingQueue)", extra: Self.resolveLocalhost)
        defer { process.stop() }
        let port = URLComponents(string: sink.baseURL)?.port ?? 80
        func run(withFailing: Bool) throws -> [Double] {
            try reset(healthyQueue)
            let started = Date()
            for n in 0..<count {
                let due = started.addingTimeInterval(Double(n) / Double(rate))
                let wait = due.timeIntervalSinceNow
                if wait > 0 { Thread.sleep(forTimeInterval: wait) }
                try enqueueOne(url: hostURL(n % 20) + "/hook", queue: healthyQueue, n: n)
                if withFailing { try enqueueOne(url: "http://failing.localhost:\(port)/fail", queue: failingQueue, n: n) }
            }
            _ = try waitForSucceeded(healthyQueue, count: count, started: started)
            return try connection.run(BenchStatements.latencies, healthyQueue).rows.map { try $0.decode(0) }.sorted()
        }
        let alone = try run(withFailing: false)
        let started = Date()
        let beside = try run(withFailing: true)
        let elapsed = Date().timeIntervalSince(started)
        let failingAttempts: Int = try connection.run(BenchStatements.attemptCount, failingQueue)[0].decode(0)
        let breaker: String = try connection.run(BenchStatements.breakerState, "failing.localhost")[0].decode(0)
        func p99(_ values: [Double]) -> Double {
            values.isEmpty ? 0 : values[min(values.count - 1, Int((0.99 * Double(values.count - 1)).rounded()))]
        }
        let ratio = p99(beside) / max(p99(alone), 0.001)
        var result = BenchResult(
            name: "failing-host", jobs: count, seconds: elapsed, cpuPerThousand: nil, peakRSS: process.stats?.peakRSS,
            detail: String(
                format: "healthy start p99 %.1f ms alone, %.1f ms beside a failing host (%.2fx); failing host: %d jobs, %d attempts, breaker %@",
                p99(alone), p99(beside), ratio, count, failingAttempts, breaker))
        result.extra["healthy_start_ms_p99_alone"] = (p99(alone) * 100).rounded() / 100
        result.extra["healthy_start_ms_p99_beside_failing"] = (p99(beside) * 100).rounded() / 100
        result.extra["healthy_p99_ratio"] = (ratio * 100).rounded() / 100
        result.extra["failing_jobs"] = count
        result.extra["failing_attempts"] = failingAttempts
        result.extra["failing_breaker"] = breaker
        return result
    }

    private func enqueueOne(url: String, queue: String, n: Int) throws {
        var job = NewJob(url: url)
        job.queue = queue
        job.body = payload(n)
        job.headers = [("Content-Type", "application/json")]
        try connection.run(AdminStatements.enqueueOne, job)
    }

    package func flaky(jobs: Int) throws -> BenchResult {
        say("flaky: \(Output.count(jobs)) jobs, 30% of first attempts fail...")
        var (result, _) = try drainLike(name: "flaky", queue: "bench-flaky", jobs: jobs, path: "/flaky", retrySchedule: [1])
        let attempts = result.extra["attempts"] as? Int ?? 0
        result.detail = "\(Output.count(attempts)) attempts (\(Output.count(attempts - jobs)) retries after ~1 s)"
        return result
    }

    package func inflight(jobs: Int, concurrency: Int) throws -> BenchResult {
        say("inflight: \(Output.count(jobs)) jobs held 1 s each, \(concurrency) in flight...")
        var maxRunning = 0
        let counter = UncheckedBox(0)
        var (result, _) = try drainLike(
            name: "inflight", queue: "bench-inflight", jobs: jobs, path: "/slow", retrySchedule: nil,
            extraWorker: ["--concurrency", String(concurrency), "--per-host-limit", String(concurrency), "--batch-size", "500"],
            sample: { _ in
                counter.value += 1
                if counter.value % 5 == 0,
                   let running: Int = try? connection.run(BenchStatements.running, "bench-inflight")[0].decode(0)
                {
                    maxRunning = max(maxRunning, running)
                }
            })
        result.extra["max_in_flight_seen"] = maxRunning
        result.detail = "peak \(Output.count(maxRunning)) running at once"
        return result
    }

    /// Every slot of the worker waits on a receiver that answers after 5 s (about 80
    /// deliveries/s with 400 slots): what a worker costs while it has nothing to do but wait.
    /// Measures the worker's CPU over `seconds` once every slot is busy.
    package func saturated(seconds: Double) throws -> BenchResult {
        let queue = "bench-saturated"
        let slots = concurrency
        // Enough to keep every slot busy for the warm-up and the whole window, and then some.
        let jobs = Int(Double(slots) * (seconds + 15) / 5)
        say("saturated: \(slots) slots held 5 s each by the receiver, measured over \(Output.duration(seconds))...")
        try reset(queue)
        try store.setPaused(queue, true)
        _ = try store.importJobs(makeJobs(jobs, path: "/hold5", queue: queue), skipInvalid: false)
        let process = try startWorker(queue: queue, extra: ["--per-host-limit", String(slots)])
        defer { process.stop() }
        try store.setPaused(queue, false)
        _ = try connection.run(BenchStatements.wake, queue)
        // Warm up: every slot taken and the first answers back.
        Thread.sleep(forTimeInterval: 6)
        let before = process.stats
        let doneBefore: Int = try connection.run(BenchStatements.succeededCount, queue)[0].decode(0)
        let started = Date()
        Thread.sleep(forTimeInterval: seconds)
        let after = process.stats
        let elapsed = Date().timeIntervalSince(started)
        let doneAfter: Int = try connection.run(BenchStatements.succeededCount, queue)[0].decode(0)
        guard process.isRunning else { throw CLIError("saturated: the worker exited during the run") }
        let delivered = doneAfter - doneBefore
        let cpu = (after?.cpuSeconds ?? 0) - (before?.cpuSeconds ?? 0)
        let coresUsed = cpu / elapsed
        var result = BenchResult(
            name: "saturated", jobs: delivered, seconds: elapsed, cpuPerThousand: cpuPerThousand(before, after, jobs: delivered),
            peakRSS: after?.peakRSS,
            detail: String(format: "%d slots held 5 s; worker CPU %.1f%% of one core (%.3f core-s/s)",
                           slots, coresUsed * 100, coresUsed))
        result.extra["worker_cpu_core_seconds_per_second"] = (coresUsed * 10_000).rounded() / 10_000
        result.extra["deliveries_per_second"] = (Double(delivered) / elapsed * 10).rounded() / 10
        result.extra["slots"] = slots
        return result
    }

    package func latency(rate: Int, seconds: Double) throws -> BenchResult {
        let queue = "bench-latency"
        let count = max(1, Int(Double(rate) * seconds))
        say("latency: \(Output.count(count)) jobs at \(rate)/s into an idle worker...")
        try reset(queue)
        let process = try startWorker(queue: queue)
        defer { process.stop() }
        let before = process.stats
        let started = Date()
        for n in 0..<count {
            let due = started.addingTimeInterval(Double(n) / Double(rate))
            let wait = due.timeIntervalSinceNow
            if wait > 0 { Thread.sleep(forTimeInterval: wait) }
            try enqueueOne(url: sink.url("/hook"), queue: queue, n: n)
        }
        let finished = try waitForSucceeded(queue, count: count, started: started)
        let after = process.stats
        var starts: [Double] = []
        var dones: [Double] = []
        for row in try connection.run(BenchStatements.latencies, queue).rows {
            starts.append(try row.decode(0))
            dones.append(try row.decode(1))
        }
        starts.sort()
        dones.sort()
        func p(_ values: [Double], _ q: Double) -> Double {
            values.isEmpty ? 0 : values[min(values.count - 1, Int((q * Double(values.count - 1)).rounded()))]
        }
        var result = BenchResult(
            name: "latency", jobs: count, seconds: finished.timeIntervalSince(started),
            cpuPerThousand: cpuPerThousand(before, after, jobs: count),
            peakRSS: after?.peakRSS,
            detail: String(
                format: "start p50 %.1f p95 %.1f p99 %.1f max %.1f ms; done p50 %.1f p99 %.1f ms",
                p(starts, 0.5), p(starts, 0.95), p(starts, 0.99), starts.last ?? 0, p(dones, 0.5), p(dones, 0.99)))
        for (key, values) in [("start", starts), ("done", dones)] {
            result.extra["\(key)_ms_p50"] = (p(values, 0.5) * 100).rounded() / 100
            result.extra["\(key)_ms_p95"] = (p(values, 0.95) * 100).rounded() / 100
            result.extra["\(key)_ms_p99"] = (p(values, 0.99) * 100).rounded() / 100
            result.extra["\(key)_ms_max"] = ((values.last ?? 0) * 100).rounded() / 100
        }
        result.extra["rate"] = rate
        return result
    }

    /// What PostgreSQL allows this pipeline: the worker's own claim and complete statements
    /// (attempt rows included), no HTTP, on enough connections to keep the server busy (two per
    /// core, or the worker's loops if more): one connection alone mostly waits for round trips
    /// and commits, which would understate the ceiling.
    package func databaseCeiling(jobs: Int) throws -> BenchResult {
        let connections = max(loops, 2 * ProcessInfo.processInfo.activeProcessorCount)
        let queue = "bench-ceiling-db"
        say("ceiling-db: \(Output.count(jobs)) jobs, claim and complete only...")
        try reset(queue)
        _ = try store.importJobs(makeJobs(jobs, path: "/hook", queue: queue), skipInvalid: false)
        let before = ProcessStats.current()
        let started = Date()
        let failures = UncheckedBox<[String]>([])
        let lock = NSLock()
        let done = DispatchGroup()
        for index in 0..<connections {
            done.enter()
            let thread = Thread { [databaseURL, batchSize] in
                defer { done.leave() }
                do {
                    let connection = try PostgresConnection(databaseURL, applicationName: "courier-bench")
                    defer { connection.close() }
                    let store = JobStore(connection: connection, workerID: "bench-ceiling/\(index)")
                    while true {
                        // No cap: this measures the statements, and a connection that finds the host
                        // at its cap would take an empty claim for the end of the queue.
                        let claimed = try store.claim(
                            queues: [queue], limit: batchSize, lease: .seconds(60), perHostLimit: 1_000_000)
                        if claimed.isEmpty { break }
                        let now = Date()
                        try store.recordOutcomes(claimed.map {
                            AttemptRecord(
                                jobID: $0.id, attempt: $0.attempt, transition: .succeed,
                                delivery: .delivered(responseExcerpt: #"{"ok":true}"#), startedAt: now, finishedAt: now)
                        })
                    }
                } catch {
                    lock.withLock { failures.value.append("\(error)") }
                }
            }
            thread.start()
        }
        done.wait()
        if let failure = failures.value.first { throw CLIError("ceiling-db: \(failure)") }
        let seconds = Date().timeIntervalSince(started)
        let after = ProcessStats.current()
        return BenchResult(
            name: "ceiling-db", jobs: jobs, seconds: seconds,
            cpuPerThousand: (after.cpuSeconds - before.cpuSeconds) / Double(jobs) * 1000, peakRSS: nil,
            detail: "claim+complete, \(connections) connections, batch \(batchSize), no HTTP (CPU: bench process)")
    }

    /// What HTTP allows: the worker's HTTP client sending the same requests to the sink,
    /// `concurrency` at once, no database.
    package func httpCeiling(jobs: Int) throws -> BenchResult {
        say("ceiling-http: \(Output.count(jobs)) requests, no database...")
        var configuration = HTTPDelivererConfiguration()
        configuration.allowPrivateTargets = true
        configuration.maximumConnectionsPerHost = concurrency
        var logger = Logger(label: "courier.bench")
        logger.logLevel = .error
        let deliverer = HTTPDeliverer(configuration: configuration, logger: logger)
        defer { deliverer.shutdown() }
        let url = sink.url("/hook")
        let before = ProcessStats.current()
        let started = Date()
        let concurrency = self.concurrency
        let payloadBytes = self.payloadBytes
        let failed = try blockingAwait { () async -> Int in
            let next = Counter()
            return await withTaskGroup(of: Int.self) { group in
                for _ in 0..<concurrency {
                    group.addTask {
                        var failures = 0
                        while true {
                            let n = next.take()
                            if n >= jobs { return failures }
                            let job = ClaimedJob(
                                id: Int64(n + 1), queue: "bench", method: "POST", url: url,
                                headers: [("Content-Type", "application/json")], body: BenchRunner.payload(n, bytes: payloadBytes), attempt: 1,
                                maxAttempts: 1, schedule: .standardWebhooks, signingSecret: nil, queueMaxInFlight: nil)
                            let delivery = await deliverer.deliver(job)
                            if delivery.verdict.durable != .succeed { failures += 1 }
                        }
                    }
                }
                return await group.reduce(0, +)
            }
        }
        let seconds = Date().timeIntervalSince(started)
        let after = ProcessStats.current()
        if failed > 0 { throw CLIError("ceiling-http: \(failed) of \(jobs) requests failed") }
        return BenchResult(
            name: "ceiling-http", jobs: jobs, seconds: seconds,
            cpuPerThousand: (after.cpuSeconds - before.cpuSeconds) / Double(jobs) * 1000, peakRSS: nil,
            detail: "same HTTP client, \(concurrency) in flight, no database (CPU: bench process incl. sink)")
    }
}

/// Worker CPU seconds per 1,000 jobs between two readings.
/// The database cluster's CPU seconds per 1,000 jobs between two readings.
package func serverPerThousand(_ before: Double?, _ after: Double?, jobs: Int) -> Double? {
    guard let before, let after, jobs > 0 else { return nil }
    return (after - before) / Double(jobs) * 1000
}

package func cpuPerThousand(_ before: ProcessStats?, _ after: ProcessStats?, jobs: Int) -> Double? {
    guard let before, let after, jobs > 0 else { return nil }
    return (after.cpuSeconds - before.cpuSeconds) / Double(jobs) * 1000
}

/// A shared counter handing out indexes to concurrent senders.
package final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0

    package func take() -> Int {
        lock.withLock {
            defer { value += 1 }
            return value
        }
    }
}
