import Dispatch
import Foundation
import Postgres

/// Runs the worker's statements on one connection. Not thread-safe: one store per loop,
/// like its connection.
///
/// Statements are prepared once per connection (`queryCached`), so the hot path sends only
/// parameters.
public struct JobStore {
    /// The connection this store runs on.
    public let connection: PostgresConnection
    /// The worker id written to `locked_by` and `courier.attempts.worker`.
    public let workerID: String
    /// When outcomes disable a registered endpoint whose own settings say nothing.
    public let endpointDisable: EndpointDisable

    /// Creates a store.
    public init(connection: PostgresConnection, workerID: String, endpointDisable: EndpointDisable = .standard) {
        self.connection = connection
        self.workerID = workerID
        self.endpointDisable = endpointDisable
    }

    /// Claims up to `limit` due jobs (see `WorkerStatements.claimBatch`); a row the worker
    /// cannot handle is moved to the dead letters instead of failing the others.
    public func claim(
        queues: [String]?, limit: Int, lease: Duration, perHostLimit: Int = Defaults.perHostLimit
    ) throws -> [ClaimedJob] {
        try claimBatch(queues: queues, limit: limit, lease: lease, perHostLimit: perHostLimit)
            .jobs
    }

    /// Claims up to `limit` due jobs, isolating rows the worker cannot handle.
    ///
    /// One bad row (a value no statement can move, written around `courier.enqueue`) must
    /// never stop the queue. When the batch statement fails on a row's data (SQLSTATE class 22
    /// or 23), the candidates are claimed one by one and each row that still fails is moved to
    /// `dead` with the reason. A claimed row whose request cannot be decoded is moved to `dead`
    /// the same way. Connection and other errors are thrown: they say nothing about a row.
    ///
    /// - Parameters:
    ///   - queues: queues to claim from; nil for all.
    ///   - limit: the most jobs to claim.
    ///   - lease: how long the lease lasts before a heartbeat must extend it.
    ///   - perHostLimit: the in-flight cap, across all workers, of a destination without its own.
    ///   - after: where the previous claim's round of the lanes ended (its `ClaimResult.cursor`);
    ///     nil starts at the first lane. A loop that passes each claim's cursor to the next
    ///     goes round every lane with due jobs (see `WorkerStatements.lockDestinations`).
    public func claimBatch(
        queues: [String]?, limit: Int, lease: Duration, perHostLimit: Int = Defaults.perHostLimit,
        after: WorkerStatements.Lane? = nil
    ) throws -> ClaimResult {
        guard limit > 0 else { return ClaimResult() }
        var rows: [PostgresRow] = []
        var out = ClaimResult()
        do {
            // Two statements in one transaction (see `WorkerStatements.lockDestinations` and
            // `claimBatch`): lock the destinations, then count and claim under those locks. The
            // transaction need not wait for its WAL flush (`claimSettings`): a lost claim leaves
            // the jobs due, and a delivery made meanwhile is a duplicate at-least-once allows.
            // Two round trips: BEGIN and the settings travel with the first statement, COMMIT
            // with the second.
            do {
                let opened = try connection.pipeline([
                    .begin, WorkerStatements.claimSettings.pipelined,
                    WorkerStatements.lockDestinations.pipelined(.init(queues: queues, limit: limit, after: after)),
                ])
                let found = opened[2].rows
                let lanes = try found.map {
                    WorkerStatements.Lane(host: try $0.decode(0), queue: try $0.decode(1))
                }
                // The round's lanes come last, in the order they were walked.
                if let last = found.last, try last.decode(2, as: Int?.self) != nil {
                    out.cursor = lanes.last
                }
                if lanes.isEmpty {
                    try connection.commit()
                    return out
                }
                // The claimed rows come in binary: a body as its bytes (hex text doubled its
                // size and cost the server about 13 instructions a byte to write out) and
                // numbers as their bytes, with nothing for either side to format or parse.
                let claimed = try connection.pipeline([
                    WorkerStatements.claimBatch.pipelined(
                        .init(queues: queues, workerID: workerID, limit: limit, lease: lease,
                              defaultHostCap: perHostLimit, lanes: lanes),
                        resultFormat: .binary),
                    .commit,
                ])[0]
                // One row with NULL job columns when nothing was claimed; the last column says
                // whether some host's room was used up.
                let heldBack = claimed.columns.count - 1
                var placed: [(place: Int64, row: PostgresRow)] = []
                for row in claimed.rows {
                    if try row.decode(heldBack, as: Bool.self) { out.heldBack = true }
                    if let place = try row.decode(heldBack - 1, as: Int64?.self) { placed.append((place, row)) }
                }
                rows = placed.sorted { $0.place < $1.place }.map(\.row)
            } catch {
                // A failed statement leaves the transaction open and aborted.
                connection.rollbackAfterError()
                throw error
            }
        } catch let error as PostgresError where error.isRowDataError {
            let candidates = try connection.run(WorkerStatements.claimCandidates, (queues: queues, limit: limit))
            for candidate in candidates.rows {
                let id: Int64 = try candidate.decode(0)
                do {
                    rows += try connection.runBinary(
                        WorkerStatements.claimOne, (id: id, workerID: workerID, lease: lease)
                    ).rows
                } catch let error as PostgresError where error.isRowDataError {
                    let reason = Redaction.message("the worker cannot claim this row: \(error.message)")
                    try connection.run(WorkerStatements.quarantineDue, (id: id, reason: reason))
                    out.quarantined.append(Quarantined(id: id, reason: reason))
                }
            }
        }
        out.jobs.reserveCapacity(rows.count)
        for row in rows {
            let id: Int64 = try row.decode(0)
            let attempt: Int = try row.decode(6)
            do {
                out.jobs.append(try Self.decodeClaimed(row))
            } catch {
                let reason = Redaction.message("the worker cannot read this job: \(error)")
                try connection.run(
                    WorkerStatements.quarantineRunning, (id: id, attempt: attempt, workerID: workerID, reason: reason))
                out.quarantined.append(Quarantined(id: id, reason: reason))
            }
        }
        return out
    }

    static func decodeClaimed(_ row: PostgresRow) throws -> ClaimedJob {
        let scheduleText: String? = try row.decode(8)
        let schedule =
            scheduleText.flatMap { PostgresArray.parse($0) }.map {
                RetrySchedule(delays: $0.compactMap { $0.flatMap(Double.init).map(Duration.seconds) })
            } ?? .standardWebhooks
        return ClaimedJob(
            id: try row.decode(0),
            queue: try row.decode(1),
            method: try row.decode(2),
            url: try row.decode(3),
            headers: try decodeHeaders(try row.decode(4)),
            body: try row.decode(5),
            attempt: try row.decode(6),
            maxAttempts: try row.decode(7),
            schedule: schedule,
            signingSecret: try row.decode(9),
            queueMaxInFlight: try row.decode(10),
            postponements: try row.decode(12),
            host: try row.decode(11),
            parkOnGone: try row.decode(13, as: Bool?.self) ?? true,
            oauth: try decodeOAuth(row, from: 14),
            endpointID: try row.decode(19),
            sealedEndpointSecrets: try decodeSealedSecrets(row.decode(20)),
            traceparent: try row.decode(21),
            bodySize: try row.decode(22))
    }

    /// Reads the body a claim left in PostgreSQL (``ClaimedJob/bodyPending``): nil when the
    /// job is no longer this worker's running attempt, so there is nothing to deliver.
    public func loadBody(of job: ClaimedJob) throws -> [UInt8]? {
        // Binary results: the body comes as its bytes, not as hex twice its size.
        let result = try connection.runBinary(
            WorkerStatements.loadBody, (id: job.id, attempt: job.attempt, workerID: workerID))
        guard result.rowCount == 1 else { return nil }
        return result[0].rawBytes(0) ?? []
    }

    /// The sealed secrets column: hex values separated by spaces, newest first.
    static func decodeSealedSecrets(_ text: String?) throws -> [[UInt8]] {
        guard let text, !text.isEmpty else { return [] }
        return try text.split(separator: " ").map { hex in
            guard let bytes = [UInt8].decode(postgresText: "\\x" + hex) else {
                throw WebhookError("a sealed endpoint secret is not hex")
            }
            return bytes
        }
    }

    /// The queue's OAuth2 credentials from the five columns starting at `first` (token URL,
    /// client id, secret, scope, audience); nil when the queue has none.
    static func decodeOAuth(_ row: PostgresRow, from first: Int) throws -> OAuth2ClientCredentials? {
        guard let tokenURL = try row.decode(first, as: String?.self),
            let clientID = try row.decode(first + 1, as: String?.self),
            let secret = try row.decode(first + 2, as: String?.self)
        else { return nil }
        return OAuth2ClientCredentials(
            tokenURL: tokenURL, clientID: clientID, clientSecret: secret, scope: try row.decode(first + 3),
            audience: try row.decode(first + 4))
    }

    /// Records a batch of finished attempts in one round trip, isolating rows that cannot take
    /// their outcome.
    ///
    /// When the batch fails on a row's data (SQLSTATE class 22 or 23, e.g. a retry delay that
    /// overflows the timestamp range), each outcome is written alone and a job whose outcome
    /// still cannot be written is moved to `dead` with the reason, so the healthy outcomes of
    /// the batch are written once and their jobs are never sent again.
    @discardableResult
    public func recordOutcomes(_ records: [AttemptRecord]) throws -> RecordResult {
        guard !records.isEmpty else { return RecordResult() }
        do {
            return RecordResult(changed: try writeOutcomes(records))
        } catch let error as PostgresError where error.isRowDataError {
            var out = RecordResult()
            for record in records {
                do {
                    out.changed.formUnion(try writeOutcomes([record]))
                } catch let error as PostgresError where error.isRowDataError {
                    let reason = Redaction.message(
                        "the outcome of attempt \(record.attempt) could not be written: \(error.message)")
                    if try connection.run(
                        WorkerStatements.quarantineRunning,
                        (id: record.jobID, attempt: record.attempt, workerID: workerID, reason: reason)
                    ).rowCount > 0 {
                        out.quarantined.append(Quarantined(id: record.jobID, reason: reason))
                    }
                }
            }
            return out
        }
    }

    /// One `completeBatch` statement for `records`: all written or, on any error, none.
    private func writeOutcomes(_ records: [AttemptRecord]) throws -> Set<Int64> {
        let result = try connection.run(
            WorkerStatements.completeBatch, (records: records, workerID: workerID, endpointDisable: endpointDisable))
        return Set(try result.rows.map { try $0.decode(0, as: Int64.self) })
    }

    /// Extends the leases of `ids`; returns those still held by this worker.
    @discardableResult
    public func heartbeat(_ ids: [Int64], lease: Duration) throws -> Set<Int64> {
        guard !ids.isEmpty else { return [] }
        let result = try connection.run(WorkerStatements.heartbeat, (ids: ids, workerID: workerID, lease: lease))
        return Set(try result.rows.map { try $0.decode(0, as: Int64.self) })
    }

    /// Gives claimed, unsent jobs back, due again after `delay`.
    @discardableResult
    public func release(_ jobs: [(id: Int64, attempt: Int)], delay: Duration) throws -> Int {
        guard !jobs.isEmpty else { return 0 }
        return try connection.run(WorkerStatements.release, (jobs: jobs, workerID: workerID, delay: delay)).rowCount
    }

    /// One maintenance pass, if no other worker is running one: rescues expired leases, folds
    /// the job counts, and deletes finished jobs older than their retention.
    ///
    /// The pass holds the fleet-wide maintenance lock for its whole length, and runs each
    /// statement in its own short transaction: a rescue batch, a fold, then deletion batches of
    /// `budget.batchSize` until one comes back short (caught up) or `budget.time` is spent
    /// (`report.caughtUp` is then false and the caller runs the next pass soon).
    ///
    /// - Parameters:
    ///   - retention: how long finished jobs are kept where their queue sets nothing.
    ///   - lease: the worker's lease; nothing is rescued within one lease of the server's start
    ///     (see `WorkerStatements.rescueExpired`).
    ///   - rescueBatchSize: the most expired leases rescued per pass.
    ///   - budget: how much deletion one pass may do.
    ///   - clock: a monotonic clock, as the time since its origin (injected by tests).
    /// - Returns: nil when another worker holds the maintenance lock.
    public func maintain(
        retention: RetentionDefaults, lease: Duration = .seconds(60), rescueBatchSize: Int = 1000,
        budget: RetentionBudget = RetentionBudget(), clock: () -> Duration = JobStore.monotonicNow
    ) throws -> MaintenanceReport? {
        guard try connection.run(WorkerStatements.tryMaintenanceLock)[0].decode(0, as: Bool.self) else {
            return nil
        }
        defer { _ = try? connection.run(WorkerStatements.maintenanceUnlock) }
        var report = MaintenanceReport()
        for row in try connection.run(
            WorkerStatements.rescueExpired, (limit: rescueBatchSize, lease: lease)
        ).rows {
            if try row.decode(1, as: String.self) == JobState.dead.rawValue {
                report.rescuedToDead += 1
            } else {
                report.rescuedToRetrying += 1
            }
        }
        report.countChangesFolded = try connection.run(WorkerStatements.foldJobCounts)[0].decode(0)
        report.gateJobsSwept = try connection.run(WorkerStatements.sweepGates)[0].decode(0)
        let started = clock()
        var deleted = 0
        repeat {
            // Planned at each run (not a cached prepared statement): a generic plan made while
            // the table was nearly empty kept deleting a later backlog at 5,000 jobs/s instead of
            // 70,000; planning costs about 1 ms of a batch's 50 to 100.
            let row = try connection.transaction(settings: WorkerStatements.retentionSettings.sql) { connection in
                try connection.run(
                    WorkerStatements.deleteExpiredFinished, (defaults: retention, batchSize: budget.batchSize))[0]
            }
            let succeeded: Int = try row.decode(0), cancelled: Int = try row.decode(1), dead: Int = try row.decode(2)
            report.deletedSucceeded += succeeded
            report.deletedCancelled += cancelled
            report.deletedDead += dead
            deleted = succeeded + cancelled + dead
            report.deleteBatches += 1
        } while budget.continues(afterDeleting: deleted, elapsed: clock() - started)
        // Messages outlive their deliveries by the longest retention: one batch a pass keeps
        // pace with any publish rate a pass's job deletion keeps pace with.
        let messageAge = max(retention.succeeded, retention.cancelled, retention.dead)
        report.deletedMessages = try WebhookStore(connection: connection)
            .purgeMessages(olderThan: messageAge, limit: budget.batchSize)
        report.deletionTime = clock() - started
        report.caughtUp = deleted < budget.batchSize && report.deletedMessages < budget.batchSize
        return report
    }

    /// One maintenance pass with the retention of succeeded jobs given and the other states at
    /// their defaults (see `maintain(retention:lease:rescueBatchSize:budget:clock:)`).
    public func maintain(
        keepingSucceeded retention: Duration, lease: Duration = .seconds(60), batchSize: Int = 1000
    ) throws -> MaintenanceReport? {
        try maintain(retention: RetentionDefaults(succeeded: retention), lease: lease, rescueBatchSize: batchSize)
    }

    /// The time since an arbitrary point, from a clock that never jumps.
    public static func monotonicNow() -> Duration {
        .nanoseconds(DispatchTime.now().uptimeNanoseconds)
    }

    /// Due jobs per queue and the age of the oldest (see `WorkerStatements.queueDepth`).
    public func queueDepth(queues: [String]?) throws -> [QueueDepth] {
        try connection.run(WorkerStatements.queueDepth, queues).rows.map {
            // A job due at -infinity (written around the checks) has no finite age: counted as
            // the longest a Duration holds here rather than trapping the maintenance loop.
            QueueDepth(
                queue: try $0.decode(0), due: try $0.decode(1),
                oldestAge: try $0.decodeSeconds(2) ?? (try $0.decode(2, as: Double.self) > 0 ? .seconds(3.2e16) : .zero))
        }
    }

    /// Fleet-wide destination and endpoint figures (see `WorkerStatements.destinationHealth`).
    public func destinationHealth() throws -> DestinationHealth {
        let row = try connection.run(WorkerStatements.destinationHealth)[0]
        return DestinationHealth(
            breakerOpen: try row.decode(0), disabled: try row.decode(1), running: try row.decode(2),
            endpointsDisabled: try row.decode(3), endpointBreakersOpen: try row.decode(4))
    }

    /// The stored headers as pairs; anything but a JSON object of strings is an error that
    /// names what was found (the row then goes to the dead letters, alone).
    static func decodeHeaders(_ json: String) throws -> [(String, String)] {
        if let pairs = HeaderObject.parse(json) { return pairs.sorted { $0.0 < $1.0 } }
        let value = try? JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed])
        guard let object = value as? [String: Any] else {
            throw JobRowError(message: "headers must be a JSON object of strings, found \(json.prefix(40))")
        }
        var pairs: [(String, String)] = []
        pairs.reserveCapacity(object.count)
        for (key, value) in object {
            guard let text = value as? String else {
                throw JobRowError(message: "headers: the value of \(key.prefix(64)) is not a string")
            }
            pairs.append((key, text))
        }
        return pairs.sorted { $0.0 < $1.0 }
    }
}

/// A job row the worker cannot use as it is.
public struct JobRowError: Error, CustomStringConvertible, Sendable {
    /// What is wrong with the row.
    public let message: String
    public var description: String { message }
}

/// A job the worker moved to the dead letters because its row could not be handled.
public struct Quarantined: Sendable, Equatable {
    /// Job id.
    public var id: Int64
    /// The reason, also written to `last_error`.
    public var reason: String
}

/// How many jobs of a queue are due now, and how long the oldest has waited.
public struct QueueDepth: Sendable, Equatable {
    /// Queue name.
    public var queue: String
    /// Jobs due now (pending or retrying with `run_at` passed).
    public var due: Int
    /// Time since the oldest due job's `run_at`.
    public var oldestAge: Duration
}

/// Destination figures for the worker's metrics.
public struct DestinationHealth: Sendable, Equatable {
    /// Destinations whose breaker is open (or half-open).
    public var breakerOpen: Int
    /// Disabled destinations.
    public var disabled: Int
    /// Requests running at all destinations.
    public var running: Int
    /// Disabled webhook endpoints (by an operator, or by their health).
    public var endpointsDisabled: Int
    /// Endpoints (registered, or plain-job URLs) whose own breaker is open or half-open.
    public var endpointBreakersOpen: Int

    /// Creates figures.
    public init(breakerOpen: Int, disabled: Int, running: Int, endpointsDisabled: Int = 0, endpointBreakersOpen: Int = 0) {
        self.breakerOpen = breakerOpen
        self.disabled = disabled
        self.running = running
        self.endpointsDisabled = endpointsDisabled
        self.endpointBreakersOpen = endpointBreakersOpen
    }
}

/// What one claim returned.
public struct ClaimResult: Sendable {
    /// Jobs claimed and ready to send.
    public var jobs: [ClaimedJob] = []
    /// Rows that could not be claimed or read and were moved to `dead` instead.
    public var quarantined: [Quarantined] = []
    /// True when some host with due jobs was at its in-flight cap: an outcome written for it
    /// frees room, a reason to claim again before the next poll.
    public var heldBack = false
    /// The lane this claim's round of the lanes ended at: the next claim of the same loop
    /// starts after it. Nil when the round found no lane.
    public var cursor: WorkerStatements.Lane?
}

/// What one outcome write did.
public struct RecordResult: Sendable {
    /// Jobs whose state changed (an id missing had lost its lease).
    public var changed: Set<Int64> = []
    /// Jobs whose outcome could not be written and that were moved to `dead` instead.
    public var quarantined: [Quarantined] = []
}

extension PostgresError {
    /// True when the server refused a statement because of a value in some row (SQLSTATE class
    /// 22, data exception, or 23, integrity constraint violation): retrying row by row can
    /// find the culprit. Anything else (permissions, timeouts, a lost connection) is not a
    /// row's fault.
    public var isRowDataError: Bool {
        guard kind == .server, let state = sqlState else { return false }
        return state.hasPrefix("22") || state.hasPrefix("23")
    }
}

/// What one maintenance pass did.
public struct MaintenanceReport: Sendable, Equatable {
    /// Expired leases returned to `retrying`.
    public var rescuedToRetrying = 0
    /// Expired leases whose attempts were exhausted, moved to `dead`.
    public var rescuedToDead = 0
    /// Old succeeded jobs deleted by retention.
    public var deletedSucceeded = 0
    /// Old cancelled jobs deleted by retention.
    public var deletedCancelled = 0
    /// Old dead jobs deleted by retention.
    public var deletedDead = 0
    /// Delete statements the pass ran.
    public var deleteBatches = 0
    /// Time the pass spent deleting.
    public var deletionTime: Duration = .zero
    /// False when the pass stopped on its time budget with old jobs left to delete.
    public var caughtUp = true
    /// Per-statement count changes folded into `courier.job_counts`.
    public var countChangesFolded = 0
    /// Stray waiting jobs moved into or out of endpoint gates (`WorkerStatements.sweepGates`).
    public var gateJobsSwept = 0
    /// Published messages deleted: older than the longest retention, with no delivery left.
    public var deletedMessages = 0

    /// Jobs deleted by retention, all states.
    public var deleted: Int { deletedSucceeded + deletedCancelled + deletedDead }

    /// An empty report.
    public init() {}
}
