import ArgumentParser
import CourierCore
import Foundation
import CourierCLISupport

/// `--keep-succeeded`, `--keep-cancelled`, `--keep-dead` of `courier queues set`.
struct KeepOptions: ParsableArguments {
    @Option(name: .customLong("keep-succeeded"), help: "Keep succeeded jobs this long (e.g. 3d), or 'default' (the worker's --retention, 7d).")
    var keepSucceeded: String?
    @Option(name: .customLong("keep-cancelled"), help: "Keep cancelled jobs this long, or 'default' (7d).")
    var keepCancelled: String?
    @Option(name: .customLong("keep-dead"), help: "Keep dead jobs this long, or 'default' (30d).")
    var keepDead: String?

    /// The change these flags ask for; a malformed or out-of-range duration is a usage error.
    func change() throws -> QueueRetentionChange {
        var change = QueueRetentionChange()
        if let keepSucceeded { change.keepSucceeded = .some(try Self.period(keepSucceeded, flag: "--keep-succeeded")) }
        if let keepCancelled { change.keepCancelled = .some(try Self.period(keepCancelled, flag: "--keep-cancelled")) }
        if let keepDead { change.keepDead = .some(try Self.period(keepDead, flag: "--keep-dead")) }
        return change
    }

    /// One line naming the queue's retention periods.
    static func summary(_ kept: QueueRetention) -> String {
        "Retention: succeeded \(keep(kept.keepSucceeded, "7d")), cancelled \(keep(kept.keepCancelled, "7d")), "
            + "dead \(keep(kept.keepDead, "30d"))."
    }

    /// A retention period for people: `3d`, or `default (7d)` when the queue sets none.
    static func keep(_ period: Duration?, _ fallback: String) -> String {
        period.map { Output.duration($0) } ?? "default (\(fallback))"
    }

    /// The period of a retention flag, nil for `default`; 0 to 3650 days like `queues_keep_bounded`.
    static func period(_ text: String, flag: String) throws -> Duration? {
        if text == "default" { return nil }
        let period = try parseDuration(text, flag: flag)
        guard period >= .zero, period <= .hours(3650 * 24) else {
            throw CLIError.usage("\(flag): \(text.debugDescription) is outside 0s to 3650d")
        }
        return period
    }
}

extension QueuesCommand {
    /// `courier queues show NAME`: one queue's settings, retention and jobs per state.
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one queue: settings, retention, and jobs per state with the lag.",
            discussion: """
                Retention shown as 'default' follows the worker's --retention (succeeded,
                7d), --retention-cancelled (7d) and --retention-dead (30d).

                Example:
                  courier queues show billing --json

                SQL: SELECT * FROM courier.queues WHERE name = 'billing';
                     SELECT * FROM courier.queue_stats WHERE queue = 'billing';
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "Queue name.")
        var name: String

        func run() throws {
            let connection = try database.connect()
            defer { connection.close() }
            let store = AdminStore(connection: connection)
            try QueueCheck.requireKnown(name, store: store)
            let settings = try store.queues().first { $0.name == name }
            let counts = try store.stateCounts(of: name)
            let retention = try store.retention(of: name)
            let lag = counts.compactMap(\.lag).max()?.seconds ?? 0
            if output.json {
                var states: [String: Any] = [:]
                for count in counts { states[count.state] = count.jobs }
                try Output.json([
                    "name": Redaction.text(name), "paused": settings?.paused ?? false,
                    "max_attempts": Output.orNull(settings?.maxAttempts),
                    "retry_schedule_seconds": Output.seconds(settings?.retrySchedule),
                    "signed": settings?.signed ?? false, "max_in_flight": Output.orNull(settings?.maxInFlight),
                    "keep_succeeded_seconds": Output.seconds(retention.keepSucceeded),
                    "keep_cancelled_seconds": Output.seconds(retention.keepCancelled),
                    "keep_dead_seconds": Output.seconds(retention.keepDead),
                    "oauth": OAuthOptions.json(settings),
                    "jobs": states, "lag_seconds": (lag * 1000).rounded() / 1000,
                ])
                return
            }
            let keep = KeepOptions.keep
            var rows: [[String]] = [
                ["Queue", Redaction.text(name)],
                ["Paused", (settings?.paused ?? false) ? "yes" : "no"],
                ["Max attempts", settings?.maxAttempts.map(String.init) ?? "default (10)"],
                ["Retry schedule", Output.schedule(settings?.retrySchedule)],
                ["Signed", (settings?.signed ?? false) ? "yes" : "no"],
                ["OAuth", OAuthOptions.summary(settings)],
                ["Max in flight", settings?.maxInFlight.map(String.init) ?? "default"],
                ["Keep succeeded", keep(retention.keepSucceeded, "7d")],
                ["Keep cancelled", keep(retention.keepCancelled, "7d")],
                ["Keep dead", keep(retention.keepDead, "30d")],
                ["Lag", lag > 0 ? Output.duration(lag) : "0"],
            ]
            for count in counts { rows.append(["Jobs \(count.state)", Output.count(count.jobs)]) }
            print(TextTable.render(rows))
        }
    }
}
