import CourierCore
import Foundation
import Postgres

/// How a worker process runs. Every field has a default; only the database URL is required.
public struct WorkerConfiguration: Sendable {
    /// Written to `locked_by` and `courier.attempts.worker` (default `hostname:pid`).
    public var workerID: String
    /// Queues to work; nil for all (default nil).
    public var queues: [String]?
    /// Deliveries in flight at once across the process (default ``Defaults/concurrency``, 400).
    public var concurrency: Int
    /// Claim loops, each with its own connection (default 1: one loop claims in bigger batches,
    /// which costs the database less per job; add processes or loops to claim in parallel).
    public var loops: Int
    /// The most jobs one claim takes (default ``Defaults/batchSize``, 200).
    public var batchSize: Int
    /// Time between claims when no notification arrives: the fallback for lost notifications
    /// and for retries whose `run_at` arrives (default 1 s; at least 10 ms).
    public var pollInterval: Duration
    /// How long a lease lasts without a heartbeat (default 60 s; 1 s to 24 h, the most
    /// `courier.jobs` accepts).
    public var leaseDuration: Duration
    /// Time between heartbeats that extend the leases of running jobs (default 15 s; shorter
    /// than the lease).
    public var heartbeatInterval: Duration
    /// Requests in flight to one destination host at once across all workers, for hosts
    /// without their own `courier.destinations.max_in_flight` (default ``Defaults/perHostLimit``,
    /// 200, half a default worker's slots: one fast host drains at full speed, which 100 did
    /// not reliably do; a slow host may then hold half of one default worker, so lower it where
    /// one worker serves many hosts of uneven speed, or cap slow hosts with `courier
    /// destinations set`). Every worker should use the same value; the claim enforces it.
    public var perHostLimit: Int
    /// How long a job whose queue is at its per-process cap waits before it is due again
    /// (default 250 ms).
    public var capDeferral: Duration
    /// Time between maintenance passes: rescue of expired leases and retention (default 5 s).
    public var maintenanceInterval: Duration
    /// Age after which succeeded jobs are deleted (default 7 days), for queues whose
    /// `keep_succeeded` is not set (`courier queues set NAME --keep-succeeded`).
    public var retention: Duration
    /// Age after which cancelled jobs are deleted, where the queue sets nothing (default 7 days).
    public var retentionCancelled: Duration = .hours(7 * 24)
    /// Age after which dead jobs are deleted, where the queue sets nothing (default 30 days).
    public var retentionDead: Duration = .hours(30 * 24)
    /// When a registered webhook endpoint is disabled on its own, where the endpoint sets
    /// nothing (default ``EndpointDisable/standard``: 5 days of failures, or 100 dead
    /// deliveries in a row).
    public var endpointDisable: EndpointDisable = .standard
    /// How much deleting one maintenance pass may do, and how soon the next pass runs while
    /// old jobs are left (default: batches of 5,000 for up to 1 s, again after 100 ms).
    public var retentionBudget = RetentionBudget()
    /// Bytes of request bodies larger than `Defaults.inlineBodyBytes` this process holds at
    /// once (default `Defaults.bodyBudgetBytes`, 64 MiB). Such a body stays in PostgreSQL
    /// until its delivery has room here; one larger than the whole budget goes alone. Bodies up
    /// to 64 KiB travel with the claim and are bounded by the slots (`concurrency` x 64 KiB).
    public var bodyBudget: Int = Defaults.bodyBudgetBytes
    /// Time in-flight deliveries get to finish after a stop is asked (default 25 s).
    public var gracePeriod: Duration
    /// Time after the grace period during which a stopping loop keeps retrying to write
    /// outcomes to an unreachable database before it exits and leaves the leases to the
    /// rescuer (default 5 s).
    public var shutdownGiveUp: Duration = .seconds(5)
    /// Time between pings of the listener's connection, which otherwise only waits and would
    /// not notice a peer that went silent (default 10 s).
    public var listenerPing: Duration = .seconds(10)
    /// Settings of the worker's database connections: TCP keepalives, timeouts and a
    /// client-side deadline per statement, so a dead or silent peer is noticed within about
    /// 30 s (default `PostgresConnection.Settings.worker`; the database URL overrides each).
    public var connection: PostgresConnection.Settings = .worker

    /// Creates a configuration with the defaults above. Nothing is clamped: ``validate()``
    /// refuses a value out of its range.
    public init(
        workerID: String = WorkerConfiguration.defaultWorkerID(),
        queues: [String]? = nil,
        concurrency: Int = Defaults.concurrency,
        loops: Int = 1,
        batchSize: Int = Defaults.batchSize,
        pollInterval: Duration = .seconds(1),
        leaseDuration: Duration = .seconds(60),
        heartbeatInterval: Duration = .seconds(15),
        perHostLimit: Int = Defaults.perHostLimit,
        capDeferral: Duration = .milliseconds(250),
        maintenanceInterval: Duration = .seconds(5),
        retention: Duration = .hours(7 * 24),
        gracePeriod: Duration = .seconds(25)
    ) {
        self.workerID = workerID
        self.queues = queues
        self.concurrency = concurrency
        self.loops = loops
        self.batchSize = batchSize
        self.pollInterval = pollInterval
        self.leaseDuration = leaseDuration
        self.heartbeatInterval = heartbeatInterval
        self.perHostLimit = perHostLimit
        self.capDeferral = capDeferral
        self.maintenanceInterval = maintenanceInterval
        self.retention = retention
        self.gracePeriod = gracePeriod
    }

    /// The longest lease `courier.jobs` accepts (its `jobs_lease_bounded` check): one day.
    public static let maximumLease: Duration = .hours(24)

    /// Refuses the first value out of its range, naming the setting and the range; the pool
    /// checks it before it starts, and the CLI turns it into a usage error (exit 2) naming its
    /// flag.
    public func validate() throws {
        func require(_ ok: Bool, _ field: String, _ range: String, _ value: @autoclosure () -> String) throws {
            if !ok { throw WorkerConfigurationError(field: field, range: range, value: value()) }
        }
        try require(!workerID.isEmpty, "workerID", "must not be empty", "\"\"")
        try require(queues.map { !$0.isEmpty } ?? true, "queues", "must name at least one queue", "none")
        try require(concurrency >= 1, "concurrency", "must be at least 1", "\(concurrency)")
        try require(loops >= 1, "loops", "must be at least 1", "\(loops)")
        try require(batchSize >= 1, "batchSize", "must be at least 1", "\(batchSize)")
        try require(perHostLimit >= 1, "perHostLimit", "must be at least 1", "\(perHostLimit)")
        try require(pollInterval >= .milliseconds(10), "pollInterval", "must be at least 10ms", "\(pollInterval)")
        try require(
            leaseDuration >= .seconds(1) && leaseDuration <= Self.maximumLease, "leaseDuration",
            "must be from 1s to 24h", "\(leaseDuration)")
        try require(
            heartbeatInterval > .zero && heartbeatInterval < leaseDuration, "heartbeatInterval",
            "must be above 0 and shorter than the lease", "\(heartbeatInterval)")
        try require(capDeferral >= .zero, "capDeferral", "must not be negative", "\(capDeferral)")
        try require(maintenanceInterval > .zero, "maintenanceInterval", "must be above 0", "\(maintenanceInterval)")
        try require(retention >= .zero, "retention", "must not be negative", "\(retention)")
        try require(retentionCancelled >= .zero, "retentionCancelled", "must not be negative", "\(retentionCancelled)")
        try require(retentionDead >= .zero, "retentionDead", "must not be negative", "\(retentionDead)")
        try require(
            endpointDisable.window >= .zero, "endpointDisableAfter", "must not be negative", "\(endpointDisable.window)")
        try require(
            endpointDisable.deadInARow >= 0, "endpointDisableDead", "must not be negative", "\(endpointDisable.deadInARow)")
        try require(bodyBudget >= 1, "bodyBudget", "must be at least 1 byte", "\(bodyBudget)")
        try require(gracePeriod >= .zero, "gracePeriod", "must not be negative", "\(gracePeriod)")
        try require(shutdownGiveUp >= .zero, "shutdownGiveUp", "must not be negative", "\(shutdownGiveUp)")
        try require(listenerPing > .zero, "listenerPing", "must be above 0", "\(listenerPing)")
    }

    /// `hostname:pid`.
    public static func defaultWorkerID() -> String {
        "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)"
    }
}

/// A worker setting out of its range.
public struct WorkerConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The ``WorkerConfiguration`` property, e.g. `pollInterval`.
    public let field: String
    /// What the value must be, e.g. `must be at least 10ms`.
    public let range: String
    /// The value given.
    public let value: String

    /// `pollInterval must be at least 10ms, got 0.005 seconds`.
    public var description: String { "\(field) \(range), got \(value)" }
}
