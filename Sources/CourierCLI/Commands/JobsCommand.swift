import ArgumentParser
import CourierCore
import Foundation
import CourierCLISupport

/// `courier jobs`: look at and act on jobs.
struct JobsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jobs",
        abstract: "List, show, cancel or run jobs now.",
        discussion: """
            Examples:
              courier jobs list --state retrying
              courier jobs show 42
              courier jobs cancel 41 42
              courier jobs cancel --all --queue billing --url-contains old.example.com --dry-run
            """,
        subcommands: [List.self, Show.self, Cancel.self, Retry.self]
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List jobs, newest first.",
            discussion: """
                Examples:
                  courier jobs list --state retrying --queue billing
                  courier jobs list --url-contains example.com --since 2h --limit 20 --json

                Text filters match literally. When more jobs match than --limit shows, a
                last line says so (on stderr with --json).

                SQL: SELECT id, state, url, attempt, last_error FROM courier.jobs
                     WHERE state = 'retrying' AND queue = 'billing' ORDER BY id DESC LIMIT 50;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Option(help: "Only jobs in this state (pending, running, retrying, succeeded, dead, cancelled).")
        var state: JobState?
        @Option(help: "Only jobs of this queue.")
        var queue: String?
        @Option(name: .customLong("url-contains"), help: "Only jobs whose URL contains this text.")
        var urlContains: String?
        @Option(help: ArgumentHelp("Only jobs created since: a duration ago (2h, 7d) or an ISO 8601 time.", valueName: "time"))
        var since: String?
        @OptionGroup var limit: LimitOption

        func run() throws {
            var filter = JobFilter()
            filter.state = state
            filter.queue = queue
            filter.urlContains = urlContains
            filter.createdSince = try parseSince(since)
            let connection = try database.connect()
            defer { connection.close() }
            let store = AdminStore(connection: connection)
            try QueueCheck.requireKnown(queue, store: store)
            try JobsOutput.printList(store, filter, limit: limit, json: output.json, showError: false)
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one job: its request (secret header values hidden) and attempt history.",
            discussion: """
                Example:
                  courier jobs show 42

                SQL: SELECT * FROM courier.jobs WHERE id = 42;
                     SELECT * FROM courier.attempts WHERE job_id = 42 ORDER BY id;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The job id.")
        var id: String

        func run() throws {
            try JobsOutput.show(id, database: database, json: output.json, onlyDead: false)
        }
    }

    struct Cancel: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel pending or retrying jobs, by id or by filter.",
            discussion: """
                A running job cannot be cancelled (its request is in flight); a finished one
                has nothing left to cancel. Each id that could not be cancelled is named
                with why. Exit code 3 when an id does not exist, 1 when a job could not be
                cancelled.

                With --all, every pending or retrying job matching the filters is cancelled
                (text filters match literally). It first counts what matches and says so: on
                a terminal it asks, in scripts --yes is required, and --dry-run only prints
                the count. Jobs are cancelled in batches, each its own short transaction;
                jobs enqueued after the count are not touched.

                Examples:
                  courier jobs cancel 41 42 43
                  courier jobs cancel --all --queue billing --url-contains old.example.com --dry-run
                  courier jobs cancel --all --queue billing --state retrying --yes

                SQL: UPDATE courier.jobs SET state = 'cancelled', finished_at = now()
                     WHERE id IN (41, 42, 43) AND state IN ('pending', 'retrying');
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "Job ids.")
        var ids: [String] = []
        @Flag(help: "Cancel every pending or retrying job matching the filters.")
        var all = false
        @Option(help: "With --all: only jobs in this state (pending or retrying).")
        var state: JobState?
        @Option(help: "With --all: only this queue.")
        var queue: String?
        @Option(
            name: .customLong("url-contains"), help: "With --all: only jobs whose URL contains this text (literally).")
        var urlContains: String?
        @Option(
            help: ArgumentHelp(
                "With --all: only jobs created since: a duration ago (2h) or an ISO 8601 time.", valueName: "time"))
        var since: String?
        @OptionGroup var bulk: BulkChangeOptions
        @Option(name: .customLong("batch-size"), help: "With --all: jobs per transaction.")
        var batchSize: Int = 1000

        func validate() throws {
            if all && !ids.isEmpty { throw CLIError.usage("give job ids or --all, not both") }
            if !all && ids.isEmpty { throw CLIError.usage("give job ids, or --all with filters") }
            if !all && (state != nil || queue != nil || urlContains != nil || since != nil || bulk.dryRun || bulk.yes) {
                throw CLIError.usage("--state, --queue, --url-contains, --since, --dry-run and --yes go with --all")
            }
            if let state, state != .pending && state != .retrying {
                throw CLIError.usage("--state: only pending or retrying jobs can be cancelled, not \(state.rawValue)")
            }
            if batchSize < 1 { throw CLIError.usage("--batch-size must be at least 1") }
        }

        func run() throws {
            guard all else {
                try JobsOutput.change(
                    JobIDs(ids: ids), database: database, json: output.json, verb: "cancelled",
                    allowed: "pending or retrying"
                ) { try $0.cancel($1) }
                return
            }
            var filter = CancelFilter()
            filter.state = state
            filter.queue = queue
            filter.urlContains = urlContains
            filter.createdSince = try parseSince(since)
            let connection = try database.connect()
            defer { connection.close() }
            let store = AdminStore(connection: connection)
            try QueueCheck.requireKnown(queue, store: store)
            let (count, maxID) = try store.countCancellable(filter)
            let what = "\(state?.rawValue ?? "pending or retrying") jobs (" + describeFilters([
                ("queue", queue), ("URL contains", urlContains),
                ("created since", filter.createdSince.map { Output.timestamp($0) }),
            ]) + ")"
            try bulk.run(verb: "cancel", done: "cancelled", count: count, what: what, json: output.json) { progress in
                try store.cancel(filter, maxID: maxID, batchSize: batchSize, progress: progress)
            }
        }
    }

    struct Retry: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run pending or retrying jobs now instead of at their run_at.",
            discussion: """
                For a dead job use `courier dead requeue`. A job that is running, succeeded
                or cancelled is left alone, with a line saying why and what to do instead.

                Example:
                  courier jobs retry 42

                SQL: UPDATE courier.jobs SET run_at = now() WHERE id = 42 AND state IN ('pending', 'retrying');
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @OptionGroup var jobs: JobIDs

        func run() throws {
            try JobsOutput.change(jobs, database: database, json: output.json, verb: "scheduled now", allowed: "pending or retrying") {
                try $0.retryNow($1)
            }
        }
    }
}

extension JobsOutput {
    /// Why nothing happened to a job in `state`, and what would do what the operator wanted.
    static func hint(verb: String, state: JobState, id: Int64) -> String? {
        if verb == "cancelled" {
            switch state {
            case .succeeded, .dead: return "it is finished; nothing is left to cancel"
            case .cancelled: return "it is cancelled already"
            case .running: return "its request is in flight now and its outcome will be recorded"
            case .pending, .retrying: return nil
            }
        }
        switch state {
        case .succeeded: return "it was delivered already; enqueue a new job to send it again"
        case .cancelled: return "it was cancelled; enqueue a new job to send it"
        case .dead: return verb == "requeued" ? nil : "use courier dead requeue \(id) to try it again"
        case .running: return "it is being delivered right now"
        case .pending, .retrying:
            return verb == "requeued" ? "it is waiting already; courier jobs retry \(id) runs it now" : nil
        }
    }
}

/// `--limit` of the list commands.
struct LimitOption: ParsableArguments {
    // `.unconditional` so `--limit -1` reaches `validate()` and gets its own message instead of
    // "missing value" (the parser would take `-1` for a flag).
    @Option(parsing: .unconditional, help: "At most this many rows, at least 1.")
    var limit: Int = 50

    func validate() throws {
        if limit < 1 { throw CLIError.usage("--limit must be at least 1, got \(limit)") }
    }
}

/// One or more job ids as arguments.
struct JobIDs: ParsableArguments {
    @Argument(help: "Job ids.")
    var ids: [String] = []

    init() {}

    init(ids: [String]) { self.ids = ids }

    func validate() throws {
        if ids.isEmpty { throw CLIError.usage("give at least one job id") }
    }
}

/// Running and rendering shared by `jobs` and `dead`.
enum JobsOutput {
    /// `jobs show` and `dead show`: one job, or exit 3.
    static func show(_ text: String, database: DatabaseOptions, json: Bool, onlyDead: Bool) throws {
        let id = try parseIDs([text])[0]
        let connection = try database.connect()
        defer { connection.close() }
        guard let job = try AdminStore(connection: connection).job(id) else {
            throw CLIError.notFound("no job with id \(id)")
        }
        if onlyDead && job.summary.state != .dead {
            throw CLIError.notFound("job \(id) is not dead (it is \(job.summary.state.rawValue)); see courier jobs show \(id)")
        }
        try printDetail(job, json: json)
    }

    /// Cancel, run now, requeue by id: applies `action` and reports each id.
    static func change(
        _ jobs: JobIDs, database: DatabaseOptions, json: Bool, verb: String, allowed: String,
        confirmingWith yes: Bool? = nil, action: (AdminStore, [Int64]) throws -> [JobChange]
    ) throws {
        let ids = try parseIDs(jobs.ids)
        if let yes { try confirm("\(verb.capitalized) \(Output.counted(ids.count, "jobs"))?", count: ids.count, yes: yes) }
        let connection = try database.connect()
        defer { connection.close() }
        try report(try action(AdminStore(connection: connection), ids), verb: verb, allowed: allowed, json: json)
    }

    /// A listing row as JSON. Every text that came from the database goes through `Redaction`:
    /// rows are written by producers, and a URL's `?token=` or an error quoting a header must
    /// not reach a terminal or a log collector.
    static func summaryJSON(_ job: JobSummary) -> [String: Any] {
        [
            "id": job.id, "queue": Redaction.text(job.queue), "state": job.state.rawValue, "priority": job.priority,
            "method": Redaction.text(job.method), "url": Redaction.url(job.url), "attempt": job.attempt,
            "max_attempts": job.maxAttempts, "run_at": Output.timestamp(job.runAt),
            "created_at": Output.timestamp(job.createdAt), "finished_at": Output.jsonTime(job.finishedAt),
            "last_status": Output.orNull(job.lastStatus),
            "last_error": Output.orNull(job.lastError.map(Redaction.message)),
        ]
    }

    /// Lists the jobs of `filter`, at most `limit`, and says when more matched: one row more
    /// than shown is asked for, so the note costs nothing extra.
    static func printList(
        _ store: AdminStore, _ filter: JobFilter, limit: LimitOption, json: Bool, showError: Bool
    ) throws {
        var filter = filter
        filter.limit = limit.limit == Int.max ? limit.limit : limit.limit + 1
        let found = try store.listJobs(filter)
        let jobs = Array(found.prefix(limit.limit))
        let cut = found.count > jobs.count
        let shown = "showing the newest \(Output.count(jobs.count)) (raise --limit or narrow the filters)"
        if json {
            try Output.json(jobs.map(summaryJSON))
            if cut { MainOutput.error("note: more jobs match: \(shown)") }
            return
        }
        guard !jobs.isEmpty else {
            print("No jobs match.")
            return
        }
        printTable(jobs, showError: showError)
        if cut { print("\nMore jobs match: \(shown).") }
    }

    static func printTable(_ jobs: [JobSummary], showError: Bool) {
        var rows = [["ID", "STATE", "QUEUE", "ATTEMPTS", "METHOD", "URL", showError ? "DIED" : "RUN AT / FINISHED", "LAST"]]
        for job in jobs {
            var last = job.lastStatus.map { "HTTP \($0)" } ?? ""
            if let error = job.lastError, job.lastStatus == nil || showError {
                last = Output.clip(Redaction.message(error), showError ? 60 : 40)
            }
            rows.append([
                String(job.id), job.state.rawValue, Redaction.text(job.queue), "\(job.attempt)/\(job.maxAttempts)",
                Output.clip(Redaction.text(job.method), 10), Output.clip(Redaction.url(job.url), 50),
                Output.timestamp(job.finishedAt ?? job.runAt), last,
            ])
        }
        print(TextTable.render(rows))
    }

    static func printDetail(_ job: JobDetail, json: Bool) throws {
        let s = job.summary
        // Bodies and response excerpts may be binary: escaped, never raw (see `Output.escaped`).
        let bodyText = job.body.map { Output.escaped($0.prefix(2000)) }
        if json {
            var object = summaryJSON(s)
            object["headers"] = job.headers.map { ["name": Redaction.text($0.0), "value": $0.1] }
            object["body_bytes"] = Output.orNull(job.body?.count)
            object["body_excerpt"] = Output.orNull(bodyText)
            object["retry_schedule_seconds"] = Output.seconds(job.retrySchedule)
            object["updated_at"] = Output.timestamp(job.updatedAt)
            object["locked_by"] = Output.orNull(job.lockedBy.map(Redaction.text))
            object["locked_until"] = Output.jsonTime(job.lockedUntil)
            object["idempotency_key"] = Output.orNull(job.idempotencyKey.map(Redaction.text))
            object["attempts"] = job.attempts.map { attempt -> [String: Any] in
                [
                    "attempt": attempt.attempt, "started_at": Output.timestamp(attempt.startedAt),
                    "finished_at": Output.timestamp(attempt.finishedAt),
                    "duration_ms": (attempt.duration.seconds * 10_000).rounded() / 10,
                    "status": Output.orNull(attempt.status),
                    "error": Output.orNull(attempt.error.map(Redaction.message)),
                    "worker": Redaction.text(attempt.worker), "in_process": attempt.inProcess,
                    "response_excerpt": Output.orNull(
                        attempt.responseExcerpt.map { Redaction.message(Output.escaped($0)) }),
                ]
            }
            try Output.json(object)
            return
        }
        var lines = [
            "Job \(s.id)  \(s.state.rawValue)  queue \(Redaction.text(s.queue))  priority \(s.priority)",
            "  request      \(Redaction.text(s.method)) \(Redaction.url(s.url))",
        ]
        for (name, value) in job.headers {
            lines.append("  header       \(Redaction.text(name)): \(Output.oneLine(value))")
        }
        if let body = job.body {
            lines.append("  body         \(body.count) bytes: \(Output.clip(bodyText ?? "", 200))")
        }
        lines.append("  attempts     \(s.attempt) of \(s.maxAttempts), retry schedule \(Output.schedule(job.retrySchedule))")
        lines.append("  created      \(Output.timestamp(s.createdAt))")
        lines.append("  run at       \(Output.timestamp(s.runAt))")
        if let finished = s.finishedAt { lines.append("  finished     \(Output.timestamp(finished))") }
        if let lockedBy = job.lockedBy {
            lines.append("  locked by    \(Redaction.text(lockedBy)) until \(Output.timestamp(job.lockedUntil))")
        }
        if let key = job.idempotencyKey { lines.append("  idempotency  \(Redaction.text(key))") }
        if let error = s.lastError { lines.append("  last error   \(Redaction.message(error))") }
        print(lines.joined(separator: "\n"))
        print("")
        if job.attempts.isEmpty {
            print("No attempts yet.")
            return
        }
        var rows = [["#", "STARTED", "DURATION", "STATUS", "ERROR", "WORKER"]]
        for attempt in job.attempts {
            rows.append([
                attempt.inProcess ? "\(attempt.attempt) (in process)" : String(attempt.attempt),
                Output.timestamp(attempt.startedAt),
                String(format: "%.1f ms", attempt.duration.seconds * 1000), attempt.status.map(String.init) ?? "-",
                Output.clip(Redaction.message(attempt.error ?? ""), 60), Redaction.text(attempt.worker),
            ])
        }
        print(TextTable.render(rows))
        let responses = job.attempts.compactMap { attempt in
            attempt.responseExcerpt.map {
                "  #\(attempt.attempt) response: \(Output.clip(Redaction.message(Output.escaped($0)), 200))"
            }
        }
        if !responses.isEmpty { print("\n" + responses.joined(separator: "\n")) }
    }

    /// Prints what happened to each id and picks the exit code: the ids changed on one stdout
    /// line, then one `error:` line on stderr per id that was not (in the order given); exit
    /// code 3 when an id does not exist, else 1 when a job was in the wrong state.
    static func report(_ changes: [JobChange], verb: String, allowed: String, json: Bool) throws {
        let changed = changes.filter(\.changed).map(\.id)
        let missing = changes.filter { $0.previousState == nil }.map(\.id)
        let refused = changes.filter { !$0.changed && $0.previousState != nil }
        if json {
            try Output.json([
                "changed": changed, "not_found": missing,
                "refused": refused.map { ["id": $0.id, "state": $0.previousState!.rawValue] },
            ])
        } else if !changed.isEmpty {
            let ids = changed.map(String.init).joined(separator: ", ")
            print("\(Output.counted(changed.count, "jobs")) \(verb): \(ids).")
        }
        for change in changes where !change.changed {
            guard let state = change.previousState else {
                MainOutput.error("error: job \(change.id): no such job")
                continue
            }
            var line = "error: job \(change.id): not \(verb): it is \(state.rawValue) (only \(allowed) jobs)"
            if let hint = hint(verb: verb, state: state, id: change.id) { line += "; \(hint)" }
            MainOutput.error(line)
        }
        if !missing.isEmpty { throw ExitCode(CourierExitCode.notFound.rawValue) }
        if !refused.isEmpty { throw ExitCode(CourierExitCode.failure.rawValue) }
    }
}
