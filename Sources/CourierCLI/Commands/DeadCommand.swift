import ArgumentParser
import CourierCore
import Foundation
import CourierCLISupport

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
              courier dead requeue --all --queue billing --url-contains hooks.example.com --dry-run
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
                  courier dead list --url-contains hooks.example.com --failed-before 2026-11-20T00:00:00Z

                Text filters match literally (% and _ are no wildcards). When more jobs
                match than --limit shows, a last line says so (on stderr with --json).

                SQL: SELECT id, url, finished_at, last_error FROM courier.jobs
                     WHERE state = 'dead' ORDER BY id DESC LIMIT 50;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @OptionGroup var filters: DeadFilterOptions
        @OptionGroup var limit: LimitOption

        func run() throws {
            let dead = try filters.filter()
            var filter = JobFilter()
            filter.state = .dead
            filter.queue = dead.queue
            filter.finishedSince = dead.failedAfter
            filter.finishedBefore = dead.failedBefore
            filter.errorContains = dead.errorContains
            filter.urlContains = dead.urlContains
            let connection = try database.connect()
            defer { connection.close() }
            let store = AdminStore(connection: connection)
            try QueueCheck.requireKnown(dead.queue, store: store)
            try JobsOutput.printList(store, filter, limit: limit, json: output.json, showError: true)
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
                By id, or every dead job matching filters with --all (the filters of
                `courier dead list`; text filters match literally). --all first counts what
                matches and says so: on a terminal it asks, in scripts --yes is required,
                and --dry-run only prints the count. Large sets are moved in batches, each
                its own short transaction, with progress on a terminal. More than 10 ids at
                once need confirmation too.

                Examples:
                  courier dead requeue 41 42
                  courier dead requeue --all --queue billing --since 6h --error-contains 'HTTP 503' --dry-run
                  courier dead requeue --all --url-contains hooks.example.com --failed-before 2026-11-20T00:00:00Z --yes

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
        @OptionGroup var filters: DeadFilterOptions
        @OptionGroup var bulk: BulkChangeOptions
        @Option(name: .customLong("batch-size"), help: "Jobs per transaction.")
        var batchSize: Int = 1000

        func validate() throws {
            if all && !ids.isEmpty { throw CLIError.usage("give job ids or --all, not both") }
            if !all && ids.isEmpty { throw CLIError.usage("give dead job ids, or --all with filters") }
            if !all && filters.isGiven {
                throw CLIError.usage(
                    "--queue, --since, --failed-after, --failed-before, --error-contains and --url-contains "
                        + "filter --all")
            }
            if !all && bulk.dryRun { throw CLIError.usage("--dry-run applies to --all") }
            if batchSize < 1 { throw CLIError.usage("--batch-size must be at least 1") }
        }

        func run() throws {
            if all { try requeueMatching() } else { try requeueByID() }
        }

        private func requeueByID() throws {
            try JobsOutput.change(
                JobIDs(ids: ids), database: database, json: output.json, verb: "requeued", allowed: "dead",
                confirmingWith: bulk.yes
            ) { try $0.requeueDead($1) }
        }

        private func requeueMatching() throws {
            let filter = try filters.filter()
            let connection = try database.connect()
            defer { connection.close() }
            let store = AdminStore(connection: connection)
            try QueueCheck.requireKnown(filter.queue, store: store)
            let (count, maxID) = try store.countDead(filter)
            let what = "dead jobs (\(DeadFilterOptions.describe(filter)))"
            try bulk.run(verb: "requeue", done: "requeued", count: count, what: what, json: output.json) { progress in
                try store.requeueDead(filter, maxID: maxID, batchSize: batchSize, progress: progress)
            }
        }
    }
}

/// The filters of `dead list` and `dead requeue --all`: the same words select the same jobs,
/// so an operator can list first and requeue the very same set.
struct DeadFilterOptions: ParsableArguments {
    @Option(help: "Only this queue.")
    var queue: String?
    @Option(
        name: [.customLong("since"), .customLong("failed-after")],
        help: ArgumentHelp(
            "Only jobs that died at or after: a duration ago (2h, 7d) or an ISO 8601 time.", valueName: "time"))
    var since: String?
    @Option(
        name: .customLong("failed-before"),
        help: ArgumentHelp(
            "Only jobs that died before: a duration ago (2h, 7d) or an ISO 8601 time.", valueName: "time"))
    var failedBefore: String?
    @Option(name: .customLong("error-contains"), help: "Only jobs whose last error contains this text (literally).")
    var errorContains: String?
    @Option(name: .customLong("url-contains"), help: "Only jobs whose URL contains this text (literally).")
    var urlContains: String?

    /// Whether any filter was given.
    var isGiven: Bool {
        queue != nil || since != nil || failedBefore != nil || errorContains != nil || urlContains != nil
    }

    /// The filter, times parsed.
    func filter() throws -> DeadJobFilter {
        var filter = DeadJobFilter()
        filter.queue = queue
        filter.failedAfter = try parseSince(since, flag: "--since")
        filter.failedBefore = try parseSince(failedBefore, flag: "--failed-before")
        filter.errorContains = errorContains
        filter.urlContains = urlContains
        return filter
    }

    /// A filter as the confirmation line shows it, times resolved (`died before 2h` could be
    /// read either way; a time cannot).
    static func describe(_ filter: DeadJobFilter) -> String {
        describeFilters([
            ("queue", filter.queue), ("died since", filter.failedAfter.map { Output.timestamp($0) }),
            ("died before", filter.failedBefore.map { Output.timestamp($0) }),
            ("error contains", filter.errorContains), ("URL contains", filter.urlContains),
        ])
    }
}
