import Foundation
import Postgres

/// Runs the admin CLI's statements (`AdminStatements`) on one connection and returns models.
public struct AdminStore {
    /// The connection used.
    public let connection: PostgresConnection

    /// Creates a store on `connection`.
    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    // MARK: Enqueue

    /// Enqueues one job through `courier.enqueue_raw` and returns its id (the existing job's id
    /// when the idempotency key is already in the queue). Invalid input throws the function's
    /// error (SQLSTATE 22023) and writes nothing.
    public func enqueue(_ job: NewJob) throws -> Int64 {
        let result = try connection.run(AdminStatements.enqueueOne, job)
        return try result[0].decode(0)
    }

    /// Loads many jobs in one transaction: COPY into a staging table, validate every row with
    /// `courier.job_problem`, then one INSERT ... SELECT.
    ///
    /// - Parameters:
    ///   - jobs: `(line number, job)` pairs in pieces; each piece is streamed as it comes.
    ///   - skipInvalid: insert the valid lines when some are rejected; otherwise a rejected
    ///     line throws `ImportRejected` and nothing is written.
    ///   - rejectedWhileReading: lines the caller could not even turn into jobs (bad JSON),
    ///     asked once all pieces are streamed; they count as rejected lines.
    ///   - progress: called with the number of lines staged so far.
    public func importJobs(
        _ pieces: some Sequence<[(Int, NewJob)]>, skipInvalid: Bool,
        rejectedWhileReading: () -> [ImportProblem] = { [] }, progress: (Int) -> Void = { _ in }
    ) throws -> ImportReport {
        try withoutActuallyEscaping(progress) { progress in
            try importJobs(pieces, skipInvalid: skipInvalid, rejectedWhileReading: rejectedWhileReading, escapingProgress: progress)
        }
    }

    private func importJobs(
        _ pieces: some Sequence<[(Int, NewJob)]>, skipInvalid: Bool, rejectedWhileReading: () -> [ImportProblem],
        escapingProgress progress: @escaping (Int) -> Void
    ) throws -> ImportReport {
        try connection.transaction { connection in
            try connection.simpleQuery(AdminStatements.createImportTable.sql)
            var staged = 0
            var headerCache = HeaderJSONCache()
            let chunks = pieces.lazy.map { piece -> [UInt8] in
                var buffer: [UInt8] = []
                buffer.reserveCapacity(piece.count * 600)
                for (line, job) in piece {
                    Self.appendCopyRow(line: line, job: job, headersJSON: headerCache.json(for: job), to: &buffer)
                }
                staged += piece.count
                progress(staged)
                return buffer
            }
            _ = try connection.copyIn(AdminStatements.copyImport.sql, chunks: chunks)
            let early = rejectedWhileReading()
            let anyInvalid: Bool = try connection.run(AdminStatements.importHasProblems)[0].decode(0)
            let late = !anyInvalid ? [] : try connection.run(AdminStatements.importProblems).rows.map {
                ImportProblem(line: try $0.decode(0), reason: try $0.decode(1))
            }
            let problems = (early + late).sorted { $0.line < $1.line }
            if !problems.isEmpty {
                guard skipInvalid else { throw ImportRejected(problems: problems) }
                if !late.isEmpty {
                    _ = try connection.run(AdminStatements.dropImportLines, late.map { Int64($0.line) })
                }
            }
            let inserted = try connection.run(AdminStatements.insertImportUnkeyed).affectedRows
                + connection.run(AdminStatements.insertImportKeyed).affectedRows
            let accepted = staged - late.count
            return ImportReport(staged: staged, inserted: inserted, duplicates: accepted - inserted, rejected: problems)
        }
    }

    static func appendCopyRow(line: Int, job: NewJob, headersJSON: String, to buffer: inout [UInt8]) {
        let tab: UInt8 = 0x09
        CopyText.appendField(String(line), to: &buffer); buffer.append(tab)
        CopyText.appendField(job.url, to: &buffer); buffer.append(tab)
        CopyText.appendField(job.method, to: &buffer); buffer.append(tab)
        CopyText.appendField(headersJSON, to: &buffer); buffer.append(tab)
        CopyText.appendField(job.queue, to: &buffer); buffer.append(tab)
        CopyText.appendBytea(job.body, to: &buffer); buffer.append(tab)
        CopyText.appendField(job.maxAttempts.map(String.init), to: &buffer); buffer.append(tab)
        CopyText.appendField(String(job.priority), to: &buffer); buffer.append(tab)
        CopyText.appendField(job.runAt.map(PostgresTimestamp.format), to: &buffer); buffer.append(tab)
        CopyText.appendField(String(job.delay.inSeconds), to: &buffer); buffer.append(tab)
        CopyText.appendField(job.idempotencyKey, to: &buffer); buffer.append(tab)
        CopyText.appendField(
            job.retrySchedule.map { "{" + $0.map { String($0.inSeconds) }.joined(separator: ",") + "}" }, to: &buffer)
        buffer.append(0x0A)
    }

    // MARK: Reading

    /// Jobs matching `filter`, newest first.
    public func listJobs(_ filter: JobFilter) throws -> [JobSummary] {
        let result = try connection.run(AdminStatements.listJobs, filter)
        return try result.rows.map(Self.summary)
    }

    static func summary(_ row: PostgresRow) throws -> JobSummary {
        let stateText: String = try row.decode(2)
        return JobSummary(
            id: try row.decode(0), queue: try row.decode(1), state: JobState(rawValue: stateText) ?? .pending,
            priority: try row.decode(3), method: try row.decode(4), url: try row.decode(5),
            attempt: try row.decode(6), maxAttempts: try row.decode(7), runAt: try row.decode(8),
            createdAt: try row.decode(9), finishedAt: try row.decode(10), lastStatus: try row.decode(11),
            lastError: try row.decode(12))
    }

    /// One job with its attempts, secret header values redacted; nil when there is no such job.
    public func job(_ id: Int64) throws -> JobDetail? {
        let result = try connection.run(AdminStatements.showJob, id)
        guard result.rowCount == 1 else { return nil }
        let row = result[0]
        let stateText: String = try row.decode(2)
        let summary = JobSummary(
            id: try row.decode(0), queue: try row.decode(1), state: JobState(rawValue: stateText) ?? .pending,
            priority: try row.decode(3), method: try row.decode(4), url: try row.decode(5),
            attempt: try row.decode(8), maxAttempts: try row.decode(9), runAt: try row.decode(11),
            createdAt: try row.decode(12), finishedAt: try row.decode(14), lastStatus: try row.decode(18),
            lastError: try row.decode(19))
        let headers = try JobStore.decodeHeaders(try row.decode(6)).map {
            ($0.0, Redaction.headerValue(name: $0.0, value: $0.1))
        }
        let scheduleText: String? = try row.decode(10)
        let attempts = try connection.run(AdminStatements.jobAttempts, id).rows.map { row in
            AttemptSummary(
                attempt: try row.decode(0), startedAt: try row.decode(1), finishedAt: try row.decode(2),
                duration: try row.decodeStoredMilliseconds(3) ?? .zero, status: try row.decode(4), error: try row.decode(5),
                worker: try row.decode(6), responseExcerpt: try row.decode(7), inProcess: try row.decode(8))
        }
        return JobDetail(
            summary: summary, headers: headers, body: try row.decode(7),
            retrySchedule: Self.schedule(scheduleText),
            updatedAt: try row.decode(13), lockedBy: try row.decode(15), lockedUntil: try row.decode(16),
            idempotencyKey: try row.decode(17), attempts: attempts)
    }

    // MARK: Changing jobs

    /// Cancels pending or retrying jobs.
    public func cancel(_ ids: [Int64]) throws -> [JobChange] {
        try changes(AdminStatements.cancelJobs, ids)
    }

    /// Makes pending or retrying jobs due now.
    public func retryNow(_ ids: [Int64]) throws -> [JobChange] {
        try changes(AdminStatements.retryJobsNow, ids)
    }

    /// Moves the given dead jobs back to pending with fresh attempts.
    public func requeueDead(_ ids: [Int64]) throws -> [JobChange] {
        try changes(AdminStatements.requeueDeadByID, ids)
    }

    private func changes(_ statement: Statement<[Int64]>, _ ids: [Int64]) throws -> [JobChange] {
        try connection.run(statement, ids).rows.map { row in
            let state: String? = try row.decode(2)
            return JobChange(id: try row.decode(0), changed: try row.decode(1), previousState: state.flatMap(JobState.init))
        }
    }

    /// Dead jobs matching a bulk requeue's filter: how many, and the highest id.
    public func countDead(_ filter: DeadJobFilter) throws -> (count: Int, maxID: Int64) {
        let row = try connection.run(AdminStatements.countDead, .init(filter: filter, maxID: Int64.max))[0]
        return (try row.decode(0), try row.decode(1))
    }

    /// Requeues matching dead jobs with ids up to `maxID`, `batchSize` per transaction.
    ///
    /// - Returns: how many moved.
    public func requeueDead(
        _ filter: DeadJobFilter, maxID: Int64, batchSize: Int, progress: (Int) -> Void = { _ in }
    ) throws -> Int {
        try inBatches(AdminStatements.requeueDeadBatch, .init(filter: filter, maxID: maxID, limit: batchSize), progress)
    }

    /// Waiting jobs matching a bulk cancel's filter: how many, and the highest id.
    public func countCancellable(_ filter: CancelFilter) throws -> (count: Int, maxID: Int64) {
        let row = try connection.run(AdminStatements.countCancellable, .init(filter: filter, maxID: Int64.max))[0]
        return (try row.decode(0), try row.decode(1))
    }

    /// Cancels matching pending or retrying jobs with ids up to `maxID`, `batchSize` per
    /// transaction; a job claimed meanwhile is left running.
    ///
    /// - Returns: how many were cancelled.
    public func cancel(
        _ filter: CancelFilter, maxID: Int64, batchSize: Int, progress: (Int) -> Void = { _ in }
    ) throws -> Int {
        try inBatches(AdminStatements.cancelBatch, .init(filter: filter, maxID: maxID, limit: batchSize), progress)
    }

    /// Runs a batch statement whose first two columns are the count and the highest id changed,
    /// each batch after the last one's highest id, until a batch is empty.
    private func inBatches<Filter>(
        _ statement: Statement<AdminStatements.Bulk<Filter>>, _ first: AdminStatements.Bulk<Filter>,
        _ progress: (Int) -> Void
    ) throws -> Int {
        var batch = first
        var moved = 0
        while true {
            let row = try connection.run(statement, batch)[0]
            let count: Int = try row.decode(0)
            if count == 0 { return moved }
            moved += count
            batch.after = try row.decode(1)
            progress(moved)
        }
    }

    /// Finished jobs a purge would delete.
    public func countPurgeable(state: JobState, olderThan cutoff: Date, queue: String?) throws -> Int {
        try connection.run(AdminStatements.countPurgeable, .init(state: state, olderThan: cutoff, queue: queue))[0]
            .decode(0)
    }

    /// Deletes finished jobs (and their attempts) in batches; returns how many.
    public func purge(
        state: JobState, olderThan cutoff: Date, queue: String?, batchSize: Int, progress: (Int) -> Void = { _ in }
    ) throws -> Int {
        var deleted = 0
        while true {
            let count = try connection.run(
                AdminStatements.purgeBatch, .init(state: state, olderThan: cutoff, queue: queue, limit: batchSize)
            ).affectedRows
            deleted += count
            if count > 0 { progress(deleted) }
            if count < batchSize { return deleted }
        }
    }

    // MARK: Queues

    /// Every known queue and its settings.
    public func queues() throws -> [QueueSettings] {
        try connection.run(AdminStatements.listQueues).rows.map { row in
            let scheduleText: String? = try row.decode(3)
            return QueueSettings(
                name: try row.decode(0), paused: try row.decode(1), maxAttempts: try row.decode(2),
                retrySchedule: Self.schedule(scheduleText),
                signed: try row.decode(4), maxInFlight: try row.decode(5), oauthTokenURL: try row.decode(6),
                oauthClientID: try row.decode(7), oauthScope: try row.decode(8), oauthAudience: try row.decode(9))
        }
    }

    /// Sets or removes queue `queue`'s OAuth2 client credentials, creating its settings row if
    /// needed (the caller checks that the queue is known).
    public func updateOAuth(_ queue: String, _ change: QueueOAuthChange) throws {
        switch change {
        case .set(let oauth): try connection.run(AdminStatements.setQueueOAuth, (queue: queue, credentials: oauth))
        case .remove: try connection.run(AdminStatements.setQueueOAuth, (queue: queue, credentials: nil))
        }
    }

    /// Whether `queue` has settings or any job.
    public func queueExists(_ queue: String) throws -> Bool {
        try connection.run(AdminStatements.queueExists, queue)[0].decode(0)
    }

    /// Every queue name in use (with settings or jobs), sorted; at most 10,000.
    public func knownQueues() throws -> [String] {
        try connection.run(AdminStatements.knownQueues).rows.map { try $0.decode(0) }
    }

    /// Pauses or resumes a queue.
    public func setPaused(_ queue: String, _ paused: Bool) throws {
        try connection.run(AdminStatements.setPaused, (queue: queue, paused: paused))
    }

    /// Applies a settings change to a queue.
    public func update(_ queue: String, _ change: QueueSettingsChange) throws {
        try connection.run(AdminStatements.setQueue, (queue: queue, change: change))
    }

    // MARK: Stats

    /// Per-queue health and whole-table estimates.
    public func stats() throws -> QueueStatsReport {
        var health: [String: QueueHealth] = [:]
        func entry(_ queue: String) -> QueueHealth { health[queue] ?? QueueHealth(queue: queue) }
        for row in try connection.run(AdminStatements.statsActive).rows {
            let queue: String = try row.decode(0)
            var item = entry(queue)
            let count: Int = try row.decode(2)
            switch try row.decode(1, as: String.self) {
            case "pending": item.pending = count
            case "running": item.running = count
            case "retrying": item.retrying = count
            default: item.dead = count
            }
            if let lag = try row.decodeStoredSeconds(3) { item.lag = max(item.lag, lag) }
            health[queue] = item
        }
        for row in try connection.run(AdminStatements.statsLastHour).rows {
            let queue: String = try row.decode(0)
            var item = entry(queue)
            item.succeededLastHour = try row.decode(1)
            item.deadLastHour = try row.decode(2)
            health[queue] = item
        }
        for row in try connection.run(AdminStatements.statsLatency).rows {
            let queue: String = try row.decode(0)
            var item = entry(queue)
            item.recentAttempts = try row.decode(1)
            item.p50 = try row.decodeStoredMilliseconds(2)
            item.p95 = try row.decodeStoredMilliseconds(3)
            item.p99 = try row.decodeStoredMilliseconds(4)
            health[queue] = item
        }
        for row in try connection.run(AdminStatements.pausedQueues).rows {
            let queue: String = try row.decode(0)
            var item = entry(queue)
            item.paused = true
            health[queue] = item
        }
        var totals: [JobState: Int] = [:]
        let estimate = try connection.run(AdminStatements.statsEstimate)
        if estimate.rowCount == 1 {
            let rows: Double = try estimate[0].decode(0)
            let values: String? = try estimate[0].decode(1)
            let freqs: String? = try estimate[0].decode(2)
            if rows > 0, let values = values.flatMap(PostgresArray.parse), let freqs = freqs.flatMap(PostgresArray.parse) {
                for (value, freq) in zip(values, freqs) {
                    if let state = value.flatMap(JobState.init), let f = freq.flatMap(Double.init) {
                        totals[state] = Int((rows * f).rounded())
                    }
                }
            }
        }
        return QueueStatsReport(queues: health.values.sorted { $0.queue < $1.queue }, estimatedTotals: totals)
    }
}

/// Remembers the JSON of the last header list: a bulk load mostly repeats the same headers,
/// and serializing them for every row cost more than the rest of the row.
struct HeaderJSONCache {
    private var headers: [(String, String)] = []
    private var cached: String?

    mutating func json(for job: NewJob) -> String {
        if let cached, job.headers.elementsEqual(headers, by: ==) { return cached }
        let json = job.headersJSON
        headers = job.headers
        cached = json
        return json
    }
}

/// A bulk import stopped because lines were rejected; nothing was written.
public struct ImportRejected: Error, Sendable {
    /// Every rejected line, in order.
    public var problems: [ImportProblem]
}
