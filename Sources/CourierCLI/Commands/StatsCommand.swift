import ArgumentParser
import CourierCore
import Foundation
import CourierCLISupport

/// `courier stats`: queue health at a glance.
struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Per queue: jobs by state, lag, last hour's outcomes, attempt latency.",
        discussion: """
            Unfinished and dead jobs are counted exactly through the indexes; totals of
            succeeded and cancelled jobs are the planner's estimates, so the command
            stays fast on tables of millions of rows. LAG is the age of the oldest due
            job. Latency percentiles cover the 10,000 most recent attempts of the last
            15 minutes. With --watch the table is redrawn in place on a terminal; into a
            pipe or file each snapshot is appended as plain text (one JSON document per
            line with --json).

            Examples:
              courier stats
              courier stats --watch --interval 2s
              courier stats --json

            SQL: SELECT * FROM courier.queue_stats;
            """
    )
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var output: OutputOptions
    @Flag(help: "Refresh in place until interrupted.")
    var watch = false
    @Option(help: "With --watch: seconds between refreshes.")
    var interval: String = "2s"

    func run() throws {
        let every = try parseDuration(interval, flag: "--interval")
        let connection = try database.connect()
        defer { connection.close() }
        let store = AdminStore(connection: connection)
        repeat {
            let report = try store.stats()
            if output.json {
                try Output.json(Self.json(report))
            } else if watch && Output.stdoutIsTerminal {
                // Redraw in place only on a terminal; into a pipe or file each snapshot is
                // appended as plain text under its own time, with no cursor codes.
                print("\u{1B}[H\u{1B}[2J", terminator: "")
                print("courier stats  \(Output.timestamp(Date()))  (every \(Output.duration(every)), Ctrl-C to stop)\n")
                print(Self.render(report))
            } else {
                if watch { print("courier stats  \(Output.timestamp(Date()))") }
                print(Self.render(report))
                if watch { print("") }
            }
            // A pipe is block-buffered: without this, `stats --watch | tee` shows nothing for minutes.
            fflush(nil)
            if watch { Thread.sleep(forTimeInterval: max(every.inSeconds, 0.2)) }
        } while watch
    }

    /// A latency in milliseconds, as the table and the JSON show it.
    static func milliseconds(_ value: StoredDuration?) -> Double? { value.map { $0.seconds * 1000 } }

    static func json(_ report: QueueStatsReport) -> [String: Any] {
        [
            "queues": report.queues.map { q -> [String: Any] in
                [
                    "queue": Redaction.text(q.queue), "paused": q.paused, "pending": q.pending, "running": q.running,
                    "retrying": q.retrying, "dead": q.dead, "lag_seconds": (q.lag.seconds * 1000).rounded() / 1000,
                    "succeeded_last_hour": q.succeededLastHour, "dead_last_hour": q.deadLastHour,
                    "recent_attempts": q.recentAttempts, "latency_ms_p50": Output.orNull(milliseconds(q.p50)),
                    "latency_ms_p95": Output.orNull(milliseconds(q.p95)), "latency_ms_p99": Output.orNull(milliseconds(q.p99)),
                ]
            },
            "estimated_totals": Dictionary(uniqueKeysWithValues: report.estimatedTotals.map { ($0.key.rawValue, $0.value) }),
        ]
    }

    static func render(_ report: QueueStatsReport) -> String {
        guard !report.queues.isEmpty else { return "No jobs yet." }
        func ms(_ value: StoredDuration?) -> String { milliseconds(value).map { String(format: "%.1f", $0) } ?? "-" }
        var rows = [["QUEUE", "PENDING", "RUNNING", "RETRYING", "DEAD", "LAG", "OK/1H", "DEAD/1H", "P50 MS", "P95 MS", "P99 MS"]]
        for q in report.queues {
            rows.append([
                Redaction.text(q.queue) + (q.paused ? " (paused)" : ""), Output.count(q.pending),
                Output.count(q.running),
                Output.count(q.retrying), Output.count(q.dead), q.lag > .zero ? Output.duration(q.lag.seconds) : "0",
                Output.count(q.succeededLastHour), Output.count(q.deadLastHour), ms(q.p50),
                ms(q.p95), ms(q.p99),
            ])
        }
        var text = TextTable.render(rows)
        let totals = [JobState.succeeded, .cancelled].compactMap { state in
            report.estimatedTotals[state].map { "\(state.rawValue) ~\(Output.count($0))" }
        }
        if !totals.isEmpty { text += "\n\nAll queues, estimated from table statistics: " + totals.joined(separator: ", ") }
        return text
    }
}
