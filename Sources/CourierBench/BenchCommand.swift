import ArgumentParser
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

/// `courier bench`: end-to-end throughput, latency and cost of the real worker path, next to
/// the ceilings of the same machine (PostgreSQL alone, HTTP alone), measured in one run.
package struct BenchCommand: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure throughput, latency and cost against this machine's own ceilings.",
        discussion: """
            Starts a throwaway PostgreSQL cluster (durable settings: fsync and
            synchronous_commit on) unless --database-url is given, and a fast HTTP
            sink on 127.0.0.1 unless --sink-url is given (used as given; fanout,
            failing-host, flaky, saturated and inflight need the built-in sink and
            are skipped). The worker is a real `courier worker` child process; its
            CPU time and peak RSS are read from /proc, and so is the CPU of the
            whole PostgreSQL cluster during each drain (PG CPU; "-" for a
            server whose data directory cannot be read). Scenarios:

              drain     bulk-enqueue --jobs jobs to one host, then time the worker
                        (its default settings) until all succeeded; prints claims
                        per delivery
              drain-limit200
                        the same with --per-host-limit 200, to compare with drain
              tls       like drain, over HTTPS to a sink of its own whose
                        certificate a CA made for the run signed (the worker
                        trusts it with --tls-ca-file; needs openssl; not in
                        the default set)
              fanout    like drain, the jobs spread over 1,000 host names of the
                        local sink (h1.localhost ... via the worker's --resolve)
              bodies    --body-jobs (300) jobs with 1 MiB bodies that do not
                        compress, to one host: the worker's peak memory (its
                        body budget)
              failing-host
                        jobs at --rate to 20 healthy hosts for --duration, first
                        alone, then with a host that answers 500 to everything:
                        the healthy hosts' enqueue->start p99 in both runs and
                        the attempts the failing host got
              latency   one job at a time at --rate for --duration into an idle,
                        listening worker
              flaky     like drain, 30% of first attempts answered 503, retry
                        after ~1 s
              ceilings  (a) claim/complete/attempt statements with no HTTP
                        (PostgreSQL's limit); (b) the worker's HTTP client
                        against the sink with no database
              inflight  1,000 deliveries held open by a slow sink: the worker's
                        peak memory
              saturated every slot held 5 s by the sink (about 80 deliveries/s
                        with 400 slots): the worker's CPU while it only waits,
                        over 30 s (not in the default set)
              scale     --due jobs drained on an empty table (a second database
                        on the same server) and next to --history finished
                        jobs, three rounds taking turns: drain, claim p99,
                        queue_stats time (not in the default set)
              soak      --soak-rate jobs/s for --soak-duration, worker
                        --retention --soak-retention: table and index sizes every
                        30 s, removal vs enqueue (not in the default set)
              scaleout  --jobs drained by --worker-processes worker processes
                        (not in the default set)
              web       every page of `courier web` timed over HTTP beside
                        --history finished jobs (not in the default set)
              webhooks  courier.publish to 1 endpoint against courier.enqueue
                        (alternating rounds), one publish to 100 endpoints,
                        and --jobs signed fan-out deliveries drained beside as
                        many plain jobs, unsigned and signed (not in the
                        default set)

            Benchmark a release build:
              swift build -c release && .build/release/courier bench
            COURIER_BENCH_WORKER=/path/to/other/courier runs that build's worker
            under the same benchmark, to compare two builds.

            Examples:
              courier bench
              courier bench --scenarios drain,ceilings --jobs 100000 --json
              courier bench --scenarios webhooks --jobs 50000
            """
    )

    @Option(name: .customLong("database-url"), help: "Benchmark this database instead of a throwaway cluster (it gets bench-* queues).")
    package var databaseURL: String?
    @Option(name: .customLong("sink-url"), help: "Send every request to this URL, as given, instead of the built-in sink.")
    package var sinkURL: String?
    @Option(help: "Comma-separated scenarios.")
    package var scenarios: String = "drain,drain-limit200,fanout,bodies,failing-host,latency,flaky,ceilings,inflight"
    @Option(help: "Jobs in drain, flaky and each ceiling.")
    package var jobs: Int = 50_000
    @Option(name: .customLong("body-jobs"), help: "Bodies: jobs with 1 MiB bodies.")
    package var bodyJobs: Int = 300
    @Option(
        name: .customLong("payload-bytes"),
        help: "Size in bytes of each job's JSON body (default: a ~200-byte event; bodies sends 1 MiB ones).")
    package var payloadBytes: Int = 0
    @Option(help: "Latency: jobs enqueued per second.")
    package var rate: Int = 200
    @Option(help: "Latency: how long to enqueue.")
    package var duration: String = "20s"
    @Option(help: "Worker deliveries in flight (default: the worker's default, \(Defaults.concurrency)).")
    package var concurrency: Int = Defaults.concurrency
    @Option(help: "Worker claim loops (the worker's default).")
    package var loops: Int = 1
    @Option(name: .customLong("batch-size"), help: "Worker claim batch (default: the worker's default, \(Defaults.batchSize)).")
    package var batchSize: Int = Defaults.batchSize
    @Option(name: .customLong("per-host-limit"), help: "Worker --per-host-limit (default: the worker's default, \(Defaults.perHostLimit)).")
    package var perHostLimit: Int?
    @Option(help: "Give up on a scenario after this long.")
    package var timeout: String = "300s"
    @OptionGroup package var output: OutputOptions
    @OptionGroup package var scale: ScaleOptions

    package func validate() throws {
        let known: Set<String> = [
            "drain", "drain-limit200", "tls", "bodies", "fanout", "failing-host", "latency", "flaky", "ceilings", "inflight", "saturated",
            "scale", "soak", "scaleout", "web", "webhooks",
        ]
        for name in scenarioList where !known.contains(name) {
            throw CLIError.usage("--scenarios: unknown scenario \(name.debugDescription) (use \(known.sorted().joined(separator: ", ")))")
        }
        if jobs < 1 || jobs > 5_000_000 { throw CLIError.usage("--jobs must be between 1 and 5000000") }
        if rate < 1 || rate > 10_000 { throw CLIError.usage("--rate must be between 1 and 10000") }
        if bodyJobs < 1 || bodyJobs > 10_000 { throw CLIError.usage("--body-jobs must be between 1 and 10000") }
        if payloadBytes != 0 && (payloadBytes < 256 || payloadBytes > 1_048_576) {
            throw CLIError.usage("--payload-bytes must be 0 (the ~200-byte event) or between 256 and 1048576")
        }
        if concurrency < 1 || loops < 1 || batchSize < 1 || (perHostLimit ?? 1) < 1 {
            throw CLIError.usage("--concurrency, --loops, --batch-size and --per-host-limit must be at least 1")
        }
    }

    package var scenarioList: [String] { scenarios.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }

    package func run() throws {
        let limit = try parseDuration(timeout, flag: "--timeout").inSeconds
        let latencySeconds = try parseDuration(duration, flag: "--duration").inSeconds
        let say: (String) -> Void = { line in if !output.json { print(line) } else { Output.stderr(line + "\n") } }

        var cluster: ThrowawayCluster?
        let url: String
        if let databaseURL {
            url = databaseURL
        } else {
            say("Starting a throwaway PostgreSQL cluster (fsync on, synchronous_commit on)...")
            cluster = try ThrowawayCluster(tuning: [
                "fsync = on", "synchronous_commit = on", "full_page_writes = on", "shared_buffers = 512MB",
                "max_wal_size = 4GB", "checkpoint_timeout = 30min",
            ])
            url = cluster!.url
        }
        defer { cluster?.stop() }
        let connection = try PostgresConnection(url, applicationName: "courier-bench")
        defer { connection.close() }
        try Migrator(logger: Logger(label: "courier.bench", factory: { _ in SwiftLogNoOpLogHandler() })).migrate(connection)
        let settings = try connection.run(BenchStatements.serverSettings)[0]

        let sink = try BenchSink.start(external: sinkURL)
        defer { sink.shutdown() }
        say("HTTP sink at \(sink.baseURL)\(sinkURL == nil ? " (built in)" : "")")

        let workerLog = TemporaryFile("courier-bench-worker-\(getpid()).log")
        defer { workerLog.remove() }
        let runner = BenchRunner(
            databaseURL: url, connection: connection, sink: sink, timeout: limit,
            worker: ["--concurrency", String(concurrency), "--loops", String(loops), "--batch-size", String(batchSize),
                     "--allow-private-targets", "--log-level", "warning"]
                + (perHostLimit.map { ["--per-host-limit", String($0)] } ?? []),
            loops: loops, batchSize: batchSize, concurrency: concurrency, say: say, workerLog: workerLog.path,
            payloadBytes: payloadBytes)
        // The cores' speed before and after the scenarios: the CPU per job below is time, and
        // this machine's cores run at very different speeds from one day (or hour) to the next.
        let referenceBefore = ReferenceWorkload.measure().milliseconds
        var results: [BenchResult] = []
        for name in scenarioList {
            switch name {
            case "drain": results.append(try runner.drain(jobs: jobs))
            case "drain-limit200": results.append(try runner.drain(jobs: jobs, perHostLimit: 200))
            case "tls": results.append(try runner.tls(jobs: jobs))
            case "bodies": results.append(try runner.bodies(count: bodyJobs))
            case "fanout":
                guard sinkURL == nil else { say("fanout: skipped (needs the built-in sink)"); continue }
                results.append(try runner.fanout(jobs: jobs, hosts: 1000))
            case "failing-host":
                guard sinkURL == nil else { say("failing-host: skipped (needs the built-in sink)"); continue }
                results.append(try runner.failingHost(rate: rate, seconds: latencySeconds))
            case "latency": results.append(try runner.latency(rate: rate, seconds: latencySeconds))
            case "flaky":
                guard sinkURL == nil else { say("flaky: skipped (needs the built-in sink)"); continue }
                results.append(try runner.flaky(jobs: jobs))
            case "ceilings":
                results.append(try runner.databaseCeiling(jobs: jobs))
                results.append(try runner.httpCeiling(jobs: jobs))
            case "saturated":
                guard sinkURL == nil else { say("saturated: skipped (needs the built-in sink)"); continue }
                results.append(try runner.saturated(seconds: 30))
            case "inflight":
                guard sinkURL == nil else { say("inflight: skipped (needs the built-in sink)"); continue }
                results.append(try runner.inflight(jobs: 3000, concurrency: 1000))
            case "scale": results += try runner.scale(history: scale.history, due: scale.due)
            case "soak":
                results.append(try runner.soak(
                    rate: scale.soakRate, seconds: try parseDuration(scale.soakDuration, flag: "--soak-duration").inSeconds,
                    retention: try parseDuration(scale.soakRetention, flag: "--soak-retention").inSeconds))
            case "scaleout": results += try runner.scaleout(jobs: jobs, processes: try scale.processCounts())
            case "web": results += try runner.web(history: scale.history)
            case "webhooks": results += try runner.webhooks(jobs: jobs)
            default: break
            }
        }

        let referenceAfter = ReferenceWorkload.measure().milliseconds
        let machine = MachineInfo.current()
        let server = "PostgreSQL \(try settings.decode(0, as: String.self)), fsync \(try settings.decode(1, as: String.self)), synchronous_commit \(try settings.decode(2, as: String.self)), shared_buffers \(try settings.decode(3, as: String.self))"
        let goals = BenchGoals.evaluate(results)
        if output.json {
            try Output.json([
                "machine": [
                    "cores": machine.cores, "memory_gib": machine.memoryGiB, "cpu": machine.cpuModel,
                    "reference_cpu_ms_before": (referenceBefore * 10).rounded() / 10,
                    "reference_cpu_ms_after": (referenceAfter * 10).rounded() / 10,
                ],
                "server": server,
                "worker": [
                    "concurrency": concurrency, "loops": loops, "batch_size": batchSize,
                    "per_host_limit": perHostLimit ?? WorkerConfiguration().perHostLimit,
                    "per_host_limit_is_default": perHostLimit == nil,
                ],
                "payload_bytes": BenchRunner.payload(1, bytes: payloadBytes).count,
                "scenarios": results.map(\.json),
                "goals": goals.map { ["goal": $0.goal, "measured": $0.measured, "met": $0.met] },
            ])
            return
        }
        print("")
        print("Machine: \(machine.cores) cores, \(machine.memoryGiB) GiB, \(machine.cpuModel)")
        print("Cores:   \(ReferenceWorkload.summary(before: referenceBefore, after: referenceAfter))")
        print("Server:  \(server)")
        let hostLimit = perHostLimit.map { "per-host limit \($0)" }
            ?? "per-host limit \(WorkerConfiguration().perHostLimit) (the worker's default)"
        print("Worker:  concurrency \(concurrency), \(loops) claim loop\(loops == 1 ? "" : "s"), batch \(batchSize), \(hostLimit)")
        print("Bodies:  \(BenchRunner.payload(1, bytes: payloadBytes).count)-byte JSON events\(payloadBytes == 0 ? " (the default; --payload-bytes sets the size)" : "")\n")
        // CPU per 1,000 jobs in seconds (= ms per job): the worker's, and the whole PostgreSQL
        // cluster's (backends, WAL writer, checkpointer, autovacuum) where the scenario drains.
        var rows = [["SCENARIO", "JOBS", "SECONDS", "JOBS/S", "CPU S/1K JOBS", "PG CPU S/1K", "PEAK RSS", "DETAIL"]]
        for result in results {
            let server = result.extra["server_cpu_seconds_per_1000_jobs"] as? Double
            rows.append([
                result.name, Output.count(result.jobs), String(format: "%.2f", result.seconds),
                Output.count(Int(result.rate.rounded())), result.cpuPerThousand.map { String(format: "%.3f", $0) } ?? "-",
                server.map { String(format: "%.3f", $0) } ?? "-",
                result.peakRSS.map { String(format: "%.0f MB", Double($0) / 1_048_576) } ?? "-", result.detail,
            ])
        }
        print(TextTable.render(rows))
        if !goals.isEmpty {
            print("")
            for goal in goals {
                print("\(goal.met ? "met   " : "MISSED") \(goal.goal): \(goal.measured)")
            }
        }
    }
}

/// The numbers of one scenario.
package struct BenchResult {
    package var name: String
    package var jobs: Int
    package var seconds: Double
    package var cpuPerThousand: Double?
    package var peakRSS: Int?
    package var detail: String
    package var extra: [String: Any] = [:]

    package var rate: Double { Double(jobs) / max(seconds, 1e-9) }

    package var json: [String: Any] {
        var object: [String: Any] = [
            "name": name, "jobs": jobs, "seconds": (seconds * 1000).rounded() / 1000,
            "jobs_per_second": rate.rounded(), "worker_cpu_seconds_per_1000_jobs": Output.orNull(cpuPerThousand),
            "worker_peak_rss_bytes": Output.orNull(peakRSS),
        ]
        for (key, value) in extra { object[key] = value }
        return object
    }
}

/// Cores, memory and CPU model, printed with the results.
package struct MachineInfo {
    package var cores: Int
    package var memoryGiB: Int
    package var cpuModel: String

    package static func current() -> MachineInfo {
        let info = ProcessInfo.processInfo
        var model = "unknown CPU"
        if let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
           let line = text.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
           let colon = line.firstIndex(of: ":")
        {
            model = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return MachineInfo(
            cores: info.activeProcessorCount, memoryGiB: Int((Double(info.physicalMemory) / 1_073_741_824).rounded()),
            cpuModel: model)
    }
}

/// The goals of the performance issue, checked against a run.
package enum BenchGoals {
    package struct Check {
        package var goal: String
        package var measured: String
        package var met: Bool
    }

    package static func evaluate(_ results: [BenchResult]) -> [Check] {
        var checks: [Check] = []
        let byName = Dictionary(results.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        if let drain = byName["drain"] {
            checks.append(Check(goal: "drain >= 5,000 jobs/s", measured: "\(Output.count(Int(drain.rate))) jobs/s", met: drain.rate >= 5000))
            if let perDelivery = drain.extra["claimed_per_delivery"] as? Double {
                checks.append(Check(
                    goal: "drain with default settings: jobs claimed per delivery <= 1.1",
                    measured: String(format: "%.3f", perDelivery), met: perDelivery <= 1.1))
            }
            if let capped = byName["drain-limit200"] {
                let fraction = drain.rate / max(capped.rate, 1e-9)
                checks.append(Check(
                    goal: "drain with default settings >= 90% of drain with --per-host-limit 200",
                    measured: String(format: "%.0f%% (%@ vs %@ jobs/s)", fraction * 100, Output.count(Int(drain.rate)),
                                     Output.count(Int(capped.rate))),
                    met: fraction >= 0.9))
            }
            if let enqueue = drain.extra["enqueue_jobs_per_second"] as? Double {
                checks.append(Check(goal: "bulk enqueue >= 30,000 jobs/s", measured: "\(Output.count(Int(enqueue))) jobs/s", met: enqueue >= 30_000))
            }
            let ceilings = [byName["ceiling-db"], byName["ceiling-http"]].compactMap { $0?.rate }
            if let lower = ceilings.min(), ceilings.count == 2 {
                let fraction = drain.rate / lower
                checks.append(Check(goal: "drain >= 50% of the lower ceiling", measured: String(format: "%.0f%% of %@ jobs/s", fraction * 100, Output.count(Int(lower))), met: fraction >= 0.5))
            }
        }
        if let publish = byName["publish-1"], let single = publish.extra["publish_vs_enqueue_single"] as? Double,
           let batched = publish.extra["publish_vs_enqueue_batched"] as? Double
        {
            checks.append(Check(
                goal: "publish to 1 endpoint >= 80% of courier.enqueue's rate",
                measured: String(format: "%.0f%% one per transaction, %.0f%% 100 per transaction", single * 100, batched * 100),
                met: min(single, batched) >= 0.8))
        }
        if let drain = byName["drain-webhooks"], let ratio = drain.extra["webhooks_vs_plain"] as? Double,
           let signed = drain.extra["webhooks_vs_signed_plain"] as? Double
        {
            checks.append(Check(
                goal: "drain of fan-out deliveries >= 90% of a drain of plain jobs",
                measured: String(format: "%.0f%% of unsigned plain jobs, %.0f%% of signed plain jobs", ratio * 100, signed * 100),
                met: ratio >= 0.9))
        }
        if let latency = byName["latency"], let p50 = latency.extra["start_ms_p50"] as? Double,
           let p99 = latency.extra["start_ms_p99"] as? Double
        {
            checks.append(Check(goal: "enqueue->start p50 <= 5 ms", measured: String(format: "%.1f ms", p50), met: p50 <= 5))
            checks.append(Check(goal: "enqueue->start p99 <= 25 ms", measured: String(format: "%.1f ms", p99), met: p99 <= 25))
        }
        if let failing = byName["failing-host"], let ratio = failing.extra["healthy_p99_ratio"] as? Double {
            checks.append(Check(
                goal: "failing-host: healthy hosts' start p99 within 2x of the run without it",
                measured: String(format: "%.2fx", ratio), met: ratio <= 2))
        }
        if let bodies = byName["bodies"], bodies.jobs >= 300, let rss = bodies.peakRSS {
            let mb = Double(rss) / 1_048_576
            checks.append(Check(
                goal: "worker peak RSS <= 200 MB draining 300 jobs with 1 MiB bodies",
                measured: String(format: "%.0f MB", mb), met: mb <= 200))
        }
        if let inflight = byName["inflight"], let rss = inflight.peakRSS {
            let mb = Double(rss) / 1_048_576
            let held = inflight.extra["max_in_flight_seen"] as? Int ?? 0
            checks.append(Check(goal: "worker peak RSS <= 100 MB with 1,000 in flight", measured: String(format: "%.0f MB with %d in flight", mb, held), met: mb <= 100 && held >= 1000))
        }
        return checks
    }
}
