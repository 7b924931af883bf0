import ArgumentParser
import CourierCore
import Foundation
import CourierCLISupport

/// `courier purge`: delete old finished jobs.
struct PurgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Delete finished jobs (and their attempts) older than a given age, in batches.",
        discussion: """
            Workers already delete succeeded jobs after their retention period; purge is
            for dead and cancelled jobs, or for a one-off clean-up. It first counts what
            matches and says what it would delete: on a terminal it asks, in scripts
            --yes is required, and --dry-run only prints the count. Each batch is its
            own short transaction; progress shows on a terminal. The age needs a unit
            (30s, 5m, 2h, 7d): a bare number is refused.

            Examples:
              courier purge --state dead --older-than 30d --dry-run
              courier purge --state succeeded --older-than 7d
              courier purge --state dead --older-than 30d --queue billing --yes

            SQL: DELETE FROM courier.jobs WHERE state = 'dead' AND finished_at < now() - interval '30 days';
            """
    )
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var bulk: BulkChangeOptions
    @Option(help: "succeeded, dead or cancelled.")
    var state: JobState
    @Option(
        name: .customLong("older-than"),
        help: "Only jobs finished longer ago than this (e.g. 7d, 12h; a unit is required).")
    var olderThan: String
    @Option(help: "Only this queue.")
    var queue: String?
    @Option(name: .customLong("batch-size"), help: "Jobs per transaction.")
    var batchSize: Int = 5000

    func validate() throws {
        guard state.isFinal else {
            throw CLIError.usage("--state must be succeeded, dead or cancelled: \(state.rawValue) jobs are not finished")
        }
        if batchSize < 1 { throw CLIError.usage("--batch-size must be at least 1") }
    }

    func run() throws {
        let age = try parseDuration(olderThan, flag: "--older-than")
        let cutoff = Date().addingTimeInterval(-age.inSeconds)
        let connection = try database.connect()
        defer { connection.close() }
        let store = AdminStore(connection: connection)
        try QueueCheck.requireKnown(queue, store: store)
        let total = try store.countPurgeable(state: state, olderThan: cutoff, queue: queue)
        let what = "\(state.rawValue) jobs finished before \(Output.timestamp(cutoff))"
            + " (\(queue.map { "queue \($0.debugDescription)" } ?? "all queues"))"
        try bulk.run(
            verb: "delete", done: "deleted", count: total, what: what, json: output.json,
            fields: ["state": state.rawValue, "finished_before": Output.timestamp(cutoff)]
        ) { progress in
            try store.purge(state: state, olderThan: cutoff, queue: queue, batchSize: batchSize, progress: progress)
        }
    }
}
