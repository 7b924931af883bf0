import ArgumentParser
import CourierCore
import Foundation
import Postgres
import CourierCLISupport

#if canImport(Glibc)
    import Glibc
#endif

/// `courier enqueue`: one job from flags, or many from JSON Lines.
struct EnqueueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enqueue",
        abstract: "Enqueue one job from flags, or many from JSON Lines (--jsonl).",
        discussion: """
            One job: prints its id. Validation is courier.enqueue's: a bad field is
            named and nothing is written. With --idempotency-key already present in the
            queue, the existing job's id is printed.

            Many jobs: one JSON object per line with the fields url, method, headers,
            payload (JSON, sent with Content-Type: application/json) or body (a string)
            or body_base64, queue, delay ("30s"), run_at (ISO 8601), max_attempts,
            priority, idempotency_key, retry_schedule (["5s","1m"]). All lines go in one
            transaction: by default one bad line inserts nothing and is reported with
            its line number; --skip-invalid inserts the good lines.

            Examples:
              courier enqueue --url https://example.com/hook --data '{"event":"paid"}'
              courier enqueue --url https://example.com/hook --header 'X-Tenant: 42' --data @event.json --delay 5m
              courier enqueue --jsonl jobs.jsonl
              producer | courier enqueue --jsonl - --skip-invalid --json
            """
    )

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var output: OutputOptions

    @Option(help: "Target URL (absolute http or https).")
    var url: String?

    @Option(help: "HTTP method.")
    var method: String = "POST"

    @Option(name: .customLong("header"), help: ArgumentHelp("A request header, 'Name: value' (repeatable).", valueName: "header"))
    var headers: [String] = []

    @Option(help: ArgumentHelp("The body: inline text, @file, or - for stdin. JSON gets Content-Type: application/json.", valueName: "data"))
    var data: String?

    @Option(help: "Queue name; a new name is allowed (with a warning when close to an existing one).")
    var queue: String = "default"

    @Option(help: ArgumentHelp("Wait this long before the first attempt (30s, 5m, 2h).", valueName: "duration"))
    var delay: String?

    @Option(help: ArgumentHelp("Run at this ISO 8601 time instead (2026-01-31T12:00:00Z).", valueName: "time"))
    var at: String?

    @Option(name: .customLong("max-attempts"), help: "Attempts before the job dies, 1 to 1000 (default: the queue's, else 10).")
    var maxAttempts: Int?

    @Option(parsing: .unconditional, help: "Priority, lower runs first; -32768 to 32767.")
    var priority: Int = 0

    @Option(name: .customLong("idempotency-key"), help: "Unique per queue: a second enqueue returns the first job's id.")
    var idempotencyKey: String?

    @Option(name: .customLong("retry-schedule"), help: ArgumentHelp("This job's retry delays, e.g. 5s,1m,1h.", valueName: "delays"))
    var retrySchedule: String?

    @Option(help: ArgumentHelp("Read jobs from a JSON Lines file, or - for stdin.", valueName: "file"))
    var jsonl: String?

    @Flag(name: .customLong("skip-invalid"), help: "With --jsonl: insert the valid lines and report the others.")
    var skipInvalid = false

    @Option(name: .customLong("batch-size"), help: "With --jsonl: lines streamed per COPY piece.")
    var batchSize: Int = 10_000

    func validate() throws {
        if jsonl != nil {
            let single: [(String, Bool)] = [
                ("--url", url != nil), ("--data", data != nil), ("--header", !headers.isEmpty), ("--delay", delay != nil),
                ("--at", at != nil), ("--max-attempts", maxAttempts != nil), ("--idempotency-key", idempotencyKey != nil),
                ("--retry-schedule", retrySchedule != nil),
            ]
            if let flag = single.first(where: \.1) {
                throw CLIError.usage("\(flag.0) describes one job and cannot be combined with --jsonl (put it in each line)")
            }
        } else {
            if url == nil { throw CLIError.usage("give --url for one job, or --jsonl FILE for many") }
            if skipInvalid { throw CLIError.usage("--skip-invalid applies only to --jsonl") }
        }
        if delay != nil && at != nil { throw CLIError.usage("give --delay or --at, not both") }
        if batchSize < 1 { throw CLIError.usage("--batch-size must be at least 1") }
        guard JobLimits.priority.contains(priority) else {
            throw CLIError.usage("--priority must be between -32768 and 32767, got \(priority)")
        }
        if let maxAttempts, !JobLimits.maxAttempts.contains(maxAttempts) {
            throw CLIError.usage("--max-attempts must be between 1 and 1000, got \(maxAttempts)")
        }
    }

    func run() throws {
        if let jsonl { try runBulk(jsonl) } else { try runOne() }
    }

    private func runOne() throws {
        var job = NewJob(url: url ?? "")
        job.method = method.uppercased()
        for header in headers { job.headers.append(try parseHeader(header)) }
        if let data {
            let body = try readData(data)
            job.body = body
            if !job.hasHeader("content-type"),
                (try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])) != nil
            {
                job.headers.append(("Content-Type", "application/json"))
            }
        }
        job.queue = queue
        if let delay { job.delay = try parseDuration(delay, flag: "--delay") }
        if let at {
            guard let date = parseISO8601(at) else {
                throw CLIError.usage("--at: \(at.debugDescription) is not an ISO 8601 time (e.g. 2026-01-31T12:00:00Z)")
            }
            guard StoredTime.range.contains(date.timeIntervalSince1970) else {
                throw CLIError.usage("--at: \(at.debugDescription) is out of range (years 1 to 9999)")
            }
            job.runAt = date
        }
        job.maxAttempts = maxAttempts
        job.priority = priority
        job.idempotencyKey = idempotencyKey
        if let retrySchedule { job.retrySchedule = try parseSchedule(retrySchedule, flag: "--retry-schedule") }

        let connection = try database.connect()
        defer { connection.close() }
        let store = AdminStore(connection: connection)
        let newQueue = try !store.queueExists(queue)
        let id = try store.enqueue(job)
        if output.json { try Output.json(["id": id]) } else { print(id) }
        if newQueue { Self.warnIfTypo(queue, store: store) }
    }

    /// Enqueueing into a queue that does not exist yet is allowed, as with `courier.enqueue`
    /// (and Oban's and River's inserts): a producer may start before the queue has settings,
    /// and a worker without `--queues` works every queue. A name one typo away from an
    /// existing queue is worth a warning, though, since its settings do not apply.
    static func warnIfTypo(_ queue: String, store: AdminStore) {
        guard let names = QueueCheck.closeMatches(for: queue, store: store) else { return }
        let shown = Redaction.text(queue).debugDescription
        MainOutput.error("warning: queue \(shown) is new (did you mean \(names)?); the job was enqueued there")
    }

    private func readData(_ argument: String) throws -> [UInt8] {
        if argument == "-" { return [UInt8](FileHandle.standardInput.readDataToEndOfFile()) }
        if argument.hasPrefix("@") {
            let path = String(argument.dropFirst())
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CLIError.usage("--data @\(path): cannot read the file")
            }
            return [UInt8](data)
        }
        return Array(argument.utf8)
    }

    private func runBulk(_ source: String) throws {
        let fd: Int32
        if source == "-" {
            fd = 0
        } else {
            fd = open(source, O_RDONLY)
            guard fd >= 0 else {
                throw CLIError.usage("--jsonl \(source): \(String(cString: strerror(errno)))")
            }
        }
        defer { if fd != 0 { close(fd) } }
        let connection = try database.connect()
        defer { connection.close() }
        let reader = JobLineReader(fd: fd, pieceSize: batchSize)
        let progress = ProgressLine("staged", total: nil)
        let started = Date()
        let report: ImportReport
        do {
            report = try AdminStore(connection: connection).importJobs(
                reader, skipInvalid: skipInvalid, rejectedWhileReading: { reader.problems },
                progress: { progress.update($0) })
        } catch let rejected as ImportRejected {
            progress.finish(reader.linesRead)
            let problems = rejected.problems
            for problem in problems.prefix(20) {
                MainOutput.error("line \(problem.line): \(Redaction.message(problem.reason))")
            }
            if problems.count > 20 { MainOutput.error("... and \(problems.count - 20) more rejected lines") }
            throw CLIError.usage(
                "\(problems.count) of \(reader.linesRead) lines rejected (first: line \(problems[0].line)); nothing was inserted (use --skip-invalid to insert the valid lines)")
        }
        progress.finish(report.staged)
        let seconds = Date().timeIntervalSince(started)
        if output.json {
            try Output.json([
                "lines": reader.linesRead, "inserted": report.inserted, "duplicates": report.duplicates,
                "rejected": report.rejected.map { ["line": $0.line, "reason": Redaction.message($0.reason)] },
                "seconds": (seconds * 1000).rounded() / 1000,
            ])
        } else {
            for problem in report.rejected.prefix(20) {
                MainOutput.error("skipped line \(problem.line): \(Redaction.message(problem.reason))")
            }
            var summary = "Inserted \(Output.counted(report.inserted, "jobs")) in \(String(format: "%.2f", seconds)) s"
            summary += " (\(Output.count(Int(Double(report.inserted) / max(seconds, 0.001))))/s)"
            if report.duplicates > 0 { summary += ", \(Output.count(report.duplicates)) already present (idempotency key)" }
            if !report.rejected.isEmpty { summary += ", \(Output.counted(report.rejected.count, "invalid lines")) skipped" }
            print(summary + ".")
        }
    }
}

/// Standard error lines that are not the final error.
enum MainOutput {
    static func error(_ line: String) { CourierMain.printError(line) }
}
