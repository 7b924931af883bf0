import ArgumentParser
import CourierCore
import Foundation

/// `courier dead`: the dead letters.
struct DeadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dead",
        abstract: "List, show and requeue dead letters.",
        discussion: """
            Examples:
              courier dead list --since 1d
              courier dead show 42
              courier dead requeue 42
            """,
        subcommands: [List.self, Show.self, Requeue.self]
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List dead jobs with their last error, newest first.",
            discussion: """
                Examples:
                  courier dead list --queue billing --since 1d
                  courier dead list --error-contains 'HTTP 410' --json

                SQL: SELECT id, url, finished_at, last_error FROM courier.jobs
                     WHERE state = 'dead' ORDER BY id DESC LIMIT 50;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Option(help: "Only this queue.")
        var queue: String?
        @Option(help: ArgumentHelp("Only jobs that died since: a duration ago (2h, 7d) or an ISO 8601 time.", valueName: "time"))
        var since: String?
        @Option(name: .customLong("error-contains"), help: "Only jobs whose last error contains this text.")
        var errorContains: String?
        @Option(name: .customLong("url-contains"), help: "Only jobs whose URL contains this text.")
        var urlContains: String?
        @Option(help: "At most this many rows (default 50).")
        var limit: Int = 50

        func validate() throws {
            if limit < 1 { throw CLIError.usage("--limit must be at least 1") }
        }

        func run() throws {
            var filter = JobFilter()
            filter.state = .dead
            filter.queue = queue
            filter.finishedSince = try parseSince(since)
            filter.errorContains = errorContains
            filter.urlContains = urlContains
            filter.limit = limit
            let connection = try database.connect()
            defer { connection.close() }
            try JobsOutput.printList(try AdminStore(connection: connection).listJobs(filter), json: output.json, showError: true)
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one dead job and why it died.",
            discussion: """
                Example:
                  courier dead show 42
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The job id.")
        var id: String

        func run() throws {
            try JobsOutput.show(id, database: database, json: output.json, onlyDead: true)
        }
    }

    struct Requeue: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move dead jobs back to pending with fresh attempts; their history stays.",
            discussion: """
                By id, or every dead job matching filters with --all. Large sets are moved in
                batches, each its own short transaction, with progress on a terminal. More than
                10 jobs need confirmation on a terminal, or --yes.

                Examples:
                  courier dead requeue 41 42
                  courier dead requeue --all --queue billing --since 6h --error-contains 'HTTP 503' --yes

                SQL: UPDATE courier.jobs SET state = 'pending', attempt = 0, run_at = now(), finished_at = NULL
                     WHERE state = 'dead' AND queue = 'billing';
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "Dead job ids.")
        var ids: [String] = []
        @Flag(help: "Requeue every dead job matching the filters.")
        var all = false
        @Option(help: "With --all: only this queue.")
        var queue: String?
        @Option(help: ArgumentHelp("With --all: only jobs that died since (2h, 7d, or ISO 8601).", valueName: "time"))
        var since: String?
        @Option(name: .customLong("error-contains"), help: "With --all: only jobs whose last error contains this text.")
        var errorContains: String?
        @Flag(help: "Do not ask for confirmation.")
        var yes = false
        @Option(name: .customLong("batch-size"), help: "Jobs per transaction (default 1000).")
        var batchSize: Int = 1000

        func validate() throws {
            if all && !ids.isEmpty { throw CLIError.usage("give job ids or --all, not both") }
            if !all && ids.isEmpty { throw CLIError.usage("give dead job ids, or --all with filters") }
            if !all && (queue != nil || since != nil || errorContains != nil) {
                throw CLIError.usage("--queue, --since and --error-contains filter --all")
            }
            if batchSize < 1 { throw CLIError.usage("--batch-size must be at least 1") }
        }

        func run() throws {
            if all { try requeueMatching() } else { try requeueByID() }
        }

        private func requeueByID() throws {
            try JobsOutput.change(
                JobIDs(ids: ids), database: database, json: output.json, verb: "requeued", allowed: "dead",
                confirmingWith: yes
            ) { try $0.requeueDead($1) }
        }

        private func requeueMatching() throws {
            let sinceDate = try parseSince(since)
            let connection = try database.connect()
            defer { connection.close() }
            let store = AdminStore(connection: connection)
            let (count, maxID) = try store.countDead(queue: queue, since: sinceDate, errorContains: errorContains)
            guard count > 0 else {
                if output.json { try Output.json(["requeued": 0]) } else { print("No dead jobs match.") }
                return
            }
            try confirm("Requeue \(Output.count(count)) dead jobs?", count: count, yes: yes)
            let progress = ProgressLine("requeued", total: count)
            let moved = try store.requeueDead(
                queue: queue, since: sinceDate, errorContains: errorContains, maxID: maxID, batchSize: batchSize,
                progress: { progress.update($0) })
            progress.finish(moved)
            if output.json { try Output.json(["requeued": moved]) } else { print("Requeued \(Output.count(moved)) dead jobs.") }
        }
    }
}
