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

    /// Creates a store.
    public init(connection: PostgresConnection, workerID: String) {
        self.connection = connection
        self.workerID = workerID
    }

    /// Claims up to `limit` due jobs (see `WorkerStatements.claimBatch`).
    ///
    /// - Parameters:
    ///   - queues: queues to claim from; nil for all.
    ///   - limit: the most jobs to claim.
    ///   - leaseMilliseconds: how long the lease lasts before a heartbeat must extend it.
    public func claim(queues: [String]?, limit: Int, leaseMilliseconds: Int) throws -> [ClaimedJob] {
        guard limit > 0 else { return [] }
        // See `WorkerStatements.claimSettings`: no wait for the WAL flush (a lost claim leaves
        // the jobs due, and a delivery made meanwhile is a duplicate at-least-once allows), and
        // a plan that walks the due index in order.
        let result = try connection.transaction { connection in
            try connection.simpleQuery(WorkerStatements.claimSettings)
            return try connection.queryCached(
                WorkerStatements.claimBatch,
                [queues.map { PostgresArray($0) }, workerID, limit, leaseMilliseconds])
        }
        var jobs: [ClaimedJob] = []
        jobs.reserveCapacity(result.rowCount)
        for row in result.rows {
            let scheduleText: String? = try row.decode(8)
            let schedule =
                scheduleText.flatMap { PostgresArray.parse($0) }.map {
                    RetrySchedule(delays: $0.compactMap { $0.flatMap(Double.init) })
                } ?? .standardWebhooks
            jobs.append(
                ClaimedJob(
                    id: try row.decode(0),
                    queue: try row.decode(1),
                    method: try row.decode(2),
                    url: try row.decode(3),
                    headers: try Self.decodeHeaders(try row.decode(4)),
                    body: try row.decode(5),
                    attempt: try row.decode(6),
                    maxAttempts: try row.decode(7),
                    schedule: schedule,
                    signingSecret: try row.decode(9),
                    queueMaxInFlight: try row.decode(10)))
        }
        return jobs
    }

    /// Records a batch of finished attempts in one round trip; returns the ids whose state
    /// changed (an id missing from it had lost its lease).
    @discardableResult
    public func complete(_ records: [AttemptRecord]) throws -> Set<Int64> {
        guard !records.isEmpty else { return [] }
        var ids: [Int64] = [], attempts: [Int] = [], states: [String] = [], delays: [Double?] = []
        var statuses: [Int?] = [], errors: [String?] = [], started: [Date] = [], finished: [Date] = []
        var excerpts: [String?] = []
        for record in records {
            ids.append(record.jobID)
            attempts.append(record.attempt)
            states.append(record.transition.state.rawValue)
            if case .retry(let delay) = record.transition { delays.append(delay * 1000) } else { delays.append(nil) }
            statuses.append(record.result.status)
            switch record.transition {
            case .dead(let reason): errors.append(reason)
            default: errors.append(record.result.error)
            }
            started.append(record.startedAt)
            finished.append(record.finishedAt)
            excerpts.append(record.responseExcerpt)
        }
        let result = try connection.queryCached(
            WorkerStatements.completeBatch,
            [
                PostgresArray(ids), PostgresArray(attempts), PostgresArray(states), PostgresArray(delays),
                PostgresArray(statuses), PostgresArray(errors), PostgresArray(started), PostgresArray(finished),
                PostgresArray(excerpts), workerID,
            ])
        return Set(try result.rows.map { try $0.decode(0, as: Int64.self) })
    }

    /// Extends the leases of `ids`; returns those still held by this worker.
    @discardableResult
    public func heartbeat(_ ids: [Int64], leaseMilliseconds: Int) throws -> Set<Int64> {
        guard !ids.isEmpty else { return [] }
        let result = try connection.queryCached(
            WorkerStatements.heartbeat, [PostgresArray(ids), workerID, leaseMilliseconds])
        return Set(try result.rows.map { try $0.decode(0, as: Int64.self) })
    }

    /// Gives claimed, unsent jobs back, due again after `delayMilliseconds`.
    @discardableResult
    public func release(_ jobs: [(id: Int64, attempt: Int)], delayMilliseconds: Int) throws -> Int {
        guard !jobs.isEmpty else { return 0 }
        return try connection.queryCached(
            WorkerStatements.release,
            [PostgresArray(jobs.map(\.id)), PostgresArray(jobs.map(\.attempt)), workerID, delayMilliseconds]
        ).rowCount
    }

    /// One maintenance pass, if no other worker is running one: rescues expired leases and
    /// deletes old succeeded jobs, each in batches of `batchSize`.
    ///
    /// - Returns: nil when another worker holds the maintenance lock.
    public func maintain(retentionSeconds: Double, batchSize: Int = 1000) throws -> MaintenanceReport? {
        try connection.transaction { conn -> MaintenanceReport? in
            guard try conn.queryCached(WorkerStatements.tryMaintenanceLock)[0].decode(0, as: Bool.self) else {
                return nil
            }
            var report = MaintenanceReport()
            for row in try conn.queryCached(WorkerStatements.rescueExpired, [batchSize]).rows {
                if try row.decode(1, as: String.self) == JobState.dead.rawValue {
                    report.rescuedToDead += 1
                } else {
                    report.rescuedToRetrying += 1
                }
            }
            report.deletedSucceeded = try conn.queryCached(
                WorkerStatements.deleteExpiredSucceeded, [retentionSeconds, batchSize]
            ).affectedRows
            return report
        }
    }

    static func decodeHeaders(_ json: String) throws -> [(String, String)] {
        guard let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            return []
        }
        return object.compactMap { key, value in (value as? String).map { (key, $0) } }.sorted { $0.0 < $1.0 }
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

    /// An empty report.
    public init() {}
}
