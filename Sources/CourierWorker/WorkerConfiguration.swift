import CourierCore
import Foundation
import Postgres

/// How a worker process runs. Every field has a default; only the database URL is required.
public struct WorkerConfiguration: Sendable {
    /// Written to `locked_by` and `courier.attempts.worker` (default `hostname:pid`).
    public var workerID: String
    /// Queues to work; nil for all (default nil).
    public var queues: [String]?
    /// Deliveries in flight at once across the process (default 200).
    public var concurrency: Int
    /// Claim loops, each with its own connection (default 1: one loop claims in bigger batches,
    /// which costs the database less per job; add processes or loops to claim in parallel).
    public var loops: Int
    /// The most jobs one claim takes (default 100).
    public var batchSize: Int
    /// Seconds between claims when no notification arrives: the fallback for lost
    /// notifications and for retries whose `run_at` arrives (default 1).
    public var pollInterval: Double
    /// Seconds a lease lasts without a heartbeat (default 60).
    public var leaseDuration: Double
    /// Seconds between heartbeats that extend the leases of running jobs (default 15).
    public var heartbeatInterval: Double
    /// Requests in flight to one destination host at once across all workers, for hosts
    /// without their own `courier.destinations.max_in_flight` (default 200, a default worker's
    /// slots: one fast host drains at full speed, which 100 did not reliably do; a slow host may
    /// then fill one default worker, so lower it where one worker serves many hosts of uneven
    /// speed, or cap slow hosts with `courier hosts set`). Every worker should use the same
    /// value; the claim enforces it.
    public var perHostLimit: Int
    /// Seconds a job whose queue is at its per-process cap waits before it is due again (default 0.25).
    public var capDeferral: Double
    /// Seconds between maintenance passes: rescue of expired leases and retention (default 5).
    public var maintenanceInterval: Double
    /// Age in seconds after which succeeded jobs are deleted (default 7 days), for queues whose
    /// `keep_succeeded` is not set (`courier queues set NAME --keep-succeeded`).
    public var retention: Double
    /// Age in seconds after which cancelled jobs are deleted, where the queue sets nothing (default 7 days).
    public var retentionCancelled: Double = 7 * 86_400
    /// Age in seconds after which dead jobs are deleted, where the queue sets nothing (default 30 days).
    public var retentionDead: Double = 30 * 86_400
    /// How much deleting one maintenance pass may do, and how soon the next pass runs while
    /// old jobs are left (default: batches of 5,000 for up to 1 s, again after 0.1 s).
    public var retentionBudget = RetentionBudget()
    /// Seconds in-flight deliveries get to finish after a stop is asked (default 25).
    public var gracePeriod: Double
    /// Seconds after the grace period during which a stopping loop keeps retrying to write
    /// outcomes to an unreachable database before it exits and leaves the leases to the
    /// rescuer (default 5).
    public var shutdownGiveUp: Double = 5
    /// Seconds between pings of the listener's connection, which otherwise only waits and
    /// would not notice a peer that went silent (default 10).
    public var listenerPing: Double = 10
    /// Settings of the worker's database connections: TCP keepalives, timeouts and a
    /// client-side deadline per statement, so a dead or silent peer is noticed within about
    /// 30 s (default `PostgresConnection.Settings.worker`; the database URL overrides each).
    public var connection: PostgresConnection.Settings = .worker

    /// Creates a configuration with the defaults above.
    public init(
        workerID: String = WorkerConfiguration.defaultWorkerID(),
        queues: [String]? = nil,
        concurrency: Int = 200,
        loops: Int = 1,
        batchSize: Int = 100,
        pollInterval: Double = 1,
        leaseDuration: Double = 60,
        heartbeatInterval: Double = 15,
        perHostLimit: Int = Defaults.perHostLimit,
        capDeferral: Double = 0.25,
        maintenanceInterval: Double = 5,
        retention: Double = 7 * 86_400,
        gracePeriod: Double = 25
    ) {
        self.workerID = workerID
        self.queues = queues
        self.concurrency = max(1, concurrency)
        self.loops = max(1, loops)
        self.batchSize = max(1, batchSize)
        self.pollInterval = pollInterval
        self.leaseDuration = leaseDuration
        self.heartbeatInterval = heartbeatInterval
        self.perHostLimit = max(1, perHostLimit)
        self.capDeferral = capDeferral
        self.maintenanceInterval = maintenanceInterval
        self.retention = retention
        self.gracePeriod = gracePeriod
    }

    /// `hostname:pid`.
    public static func defaultWorkerID() -> String {
        "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)"
    }
}
