import ArgumentParser
import CourierCore
import Foundation

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
        @Option(help: "At most this many rows (default 50).")
        var limit: Int = 50

        func validate() throws {
            if limit < 1 { throw CLIError.usage("--limit must be at least 1") }
        }

        func run() throws {
            var filter = JobFilter()
            filter.state = state
            filter.queue = queue
            filter.urlContains = urlContains
            filter.createdSince = try parseSince(since)
            filter.limit = limit
            let connection = try database.connect()
            defer { connection.close() }
            let jobs = try AdminStore(connection: connection).listJobs(filter)
            try JobsOutput.printList(jobs, json: output.json, showError: false)
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
            abstract: "Cancel pending or retrying jobs.",
            discussion: """
                A running job cannot be cancelled (its request is in flight); a finished one has
                nothing left to cancel. Each id that could not be cancelled is named with why.
                Exit code 3 when an id does not exist, 1 when a job could not be cancelled.

                Example:
                  courier jobs cancel 41 42 43

                SQL: UPDATE courier.jobs SET state = 'cancelled', finished_at = now()
                     WHERE id IN (41, 42, 43) AND state IN ('pending', 'retrying');
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @OptionGroup var jobs: JobIDs

        func run() throws {
            try JobsOutput.change(jobs, database: database, json: output.json, verb: "cancelled", allowed: "pending or retrying") {
                try $0.cancel($1)
            }
        }
    }

    struct Retry: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run pending or retrying jobs now instead of at their run_at.",
            discussion: """
                For a dead job use `courier dead requeue`.

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
        if let yes { try confirm("\(verb.capitalized) \(ids.count) jobs?", count: ids.count, yes: yes) }
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

    static func printList(_ jobs: [JobSummary], json: Bool, showError: Bool) throws {
        if json {
            try Output.json(jobs.map(summaryJSON))
            return
        }
        guard !jobs.isEmpty else {
            print("No jobs match.")
            return
        }
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
        let bodyText = job.body.map { Redaction.text(String(decoding: $0.prefix(2000), as: UTF8.self)) }
        if json {
            var object = summaryJSON(s)
            object["headers"] = job.headers.map { ["name": Redaction.text($0.0), "value": $0.1] }
            object["body_bytes"] = Output.orNull(job.body?.count)
            object["body_excerpt"] = Output.orNull(bodyText)
            object["retry_schedule_seconds"] = Output.orNull(job.retrySchedule)
            object["updated_at"] = Output.timestamp(job.updatedAt)
            object["locked_by"] = Output.orNull(job.lockedBy.map(Redaction.text))
            object["locked_until"] = Output.jsonTime(job.lockedUntil)
            object["idempotency_key"] = Output.orNull(job.idempotencyKey.map(Redaction.text))
            object["attempts"] = job.attempts.map { attempt -> [String: Any] in
                [
                    "attempt": attempt.attempt, "started_at": Output.timestamp(attempt.startedAt),
                    "finished_at": Output.timestamp(attempt.finishedAt),
                    "duration_ms": (attempt.durationMilliseconds * 10).rounded() / 10,
                    "status": Output.orNull(attempt.status),
                    "error": Output.orNull(attempt.error.map(Redaction.message)),
                    "worker": Redaction.text(attempt.worker),
                    "response_excerpt": Output.orNull(attempt.responseExcerpt.map(Redaction.message)),
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
            lines.append("  body         \(body.count) bytes: \(Output.clip(Output.oneLine(bodyText ?? ""), 200))")
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
                String(attempt.attempt), Output.timestamp(attempt.startedAt),
                String(format: "%.1f ms", attempt.durationMilliseconds), attempt.status.map(String.init) ?? "-",
                Output.clip(Redaction.message(attempt.error ?? ""), 60), Redaction.text(attempt.worker),
            ])
        }
        print(TextTable.render(rows))
    }

    /// Prints what happened to each id and picks the exit code: 3 when an id does not exist,
    /// 1 when a job was in the wrong state.
    static func report(_ changes: [JobChange], verb: String, allowed: String, json: Bool) throws {
        let changed = changes.filter(\.changed).map(\.id)
        let missing = changes.filter { $0.previousState == nil }.map(\.id)
        let refused = changes.filter { !$0.changed && $0.previousState != nil }
        if json {
            try Output.json([
                "changed": changed, "not_found": missing,
                "refused": refused.map { ["id": $0.id, "state": $0.previousState!.rawValue] },
            ])
        } else {
            if !changed.isEmpty { print("\(verb): \(changed.map(String.init).joined(separator: " "))") }
        }
        for change in refused {
            MainOutput.error("job \(change.id): not \(verb): it is \(change.previousState!.rawValue) (only \(allowed) jobs)")
        }
        for id in missing { MainOutput.error("job \(id): no such job") }
        if !missing.isEmpty {
            throw CLIError.notFound("\(missing.count) of \(changes.count) jobs not found")
        }
        if !refused.isEmpty {
            throw CLIError("\(refused.count) of \(changes.count) jobs not \(verb)")
        }
    }
}
