import ArgumentParser
import CourierCore
import Foundation

/// `courier purge`: delete old finished jobs.
struct PurgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Delete finished jobs (and their attempts) older than a given age, in batches.",
        discussion: """
            Workers already delete succeeded jobs after their retention period; purge is for
            dead and cancelled jobs, or for a one-off clean-up. Each batch is its own short
            transaction; progress shows on a terminal.

            Examples:
              courier purge --state succeeded --older-than 7d
              courier purge --state dead --older-than 30d --queue billing

            SQL: DELETE FROM courier.jobs WHERE state = 'dead' AND finished_at < now() - interval '30 days';
            """
    )
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var output: OutputOptions
    @Option(help: "succeeded, dead or cancelled.")
    var state: JobState
    @Option(name: .customLong("older-than"), help: "Only jobs finished longer ago than this (e.g. 7d, 12h).")
    var olderThan: String
    @Option(help: "Only this queue.")
    var queue: String?
    @Option(name: .customLong("batch-size"), help: "Jobs per transaction (default 5000).")
    var batchSize: Int = 5000

    func validate() throws {
        guard state.isFinal else {
            throw CLIError.usage("--state must be succeeded, dead or cancelled: \(state.rawValue) jobs are not finished")
        }
        if batchSize < 1 { throw CLIError.usage("--batch-size must be at least 1") }
    }

    func run() throws {
        let age = try parseDuration(olderThan, flag: "--older-than")
        let cutoff = Date().addingTimeInterval(-age)
        let connection = try database.connect()
        defer { connection.close() }
        let store = AdminStore(connection: connection)
        let total = Output.stderrIsTerminal ? try store.countPurgeable(state: state, olderThan: cutoff, queue: queue) : nil
        let progress = ProgressLine("deleted", total: total)
        let deleted = try store.purge(
            state: state, olderThan: cutoff, queue: queue, batchSize: batchSize, progress: { progress.update($0) })
        progress.finish(deleted)
        if output.json {
            try Output.json(["deleted": deleted, "state": state.rawValue, "finished_before": Output.timestamp(cutoff)])
        } else {
            print("Deleted \(Output.count(deleted)) \(state.rawValue) jobs finished before \(Output.timestamp(cutoff)).")
        }
    }
}
