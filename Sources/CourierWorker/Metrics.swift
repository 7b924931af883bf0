import CourierCore
import Foundation
import Metrics

/// The worker's metrics, through swift-metrics (exported for Prometheus by `courier worker
/// --metrics-port`).
final class WorkerMetrics: @unchecked Sendable {
    /// Claim statements run.
    let claims = Counter(label: "courier_claims_total")
    /// Jobs those claims returned.
    let claimed = Counter(label: "courier_jobs_claimed_total")
    let succeeded = Counter(label: "courier_jobs_succeeded_total")
    let retried = Counter(label: "courier_jobs_retried_total")
    let dead = Counter(label: "courier_jobs_dead_total")
    /// Jobs rescheduled without spending an attempt (429/503 with Retry-After).
    let postponed = Counter(label: "courier_jobs_postponed_total")
    /// Jobs parked because their destination answered 410 Gone and was disabled.
    let parked = Counter(label: "courier_jobs_parked_total")
    /// Claimed jobs given back because their queue was at its per-process cap.
    let deferred = Counter(label: "courier_jobs_deferred_total")
    let rescued = Counter(label: "courier_jobs_rescued_total")
    let latency = Timer(label: "courier_delivery_duration_seconds")
    /// Requests on the wire now: a delivery counts from the moment it starts sending until its
    /// response (or failure) is known, not while its outcome waits to be written.
    let inFlight = Meter(label: "courier_deliveries_in_flight")

    private let lock = NSLock()
    private var written = 0
    private var tallies = OutcomeTally()
    private var knownQueues: Set<String> = []

    /// Outcomes written since start.
    var outcomesWritten: Int { lock.withLock { written } }

    func wireStarted() { inFlight.increment() }
    func wireEnded() { inFlight.decrement() }

    /// Outcomes written since start, by kind.
    var outcomes: OutcomeTally { lock.withLock { tallies } }

    /// Counts an outcome once it is written.
    func record(_ transition: JobTransition) {
        lock.withLock {
            written += 1
            tallies.add(transition)
        }
        switch transition {
        case .succeed: succeeded.increment()
        case .retry: retried.increment()
        case .dead: dead.increment()
        case .postpone: postponed.increment()
        case .park: parked.increment()
        }
    }

    /// Publishes how many destinations have an open breaker, are disabled, or are at their
    /// in-flight cap (fleet-wide figures: every worker reports the same).
    func recordDestinations(_ health: DestinationHealth) {
        Gauge(label: "courier_destinations_breaker_open").record(health.breakerOpen)
        Gauge(label: "courier_destinations_disabled").record(health.disabled)
        Gauge(label: "courier_destinations_running").record(health.running)
    }

    /// Publishes per-queue due depth and the age of the oldest due job; queues that no longer
    /// have due jobs drop to zero rather than keep their last value.
    func recordDepth(_ depths: [QueueDepth]) {
        let seen = Set(depths.map(\.queue))
        let stale = lock.withLock { () -> Set<String> in
            defer { knownQueues.formUnion(seen) }
            return knownQueues.subtracting(seen)
        }
        for depth in depths {
            Gauge(label: "courier_queue_due_jobs", dimensions: [("queue", depth.queue)]).record(depth.due)
            Gauge(label: "courier_queue_oldest_due_age_seconds", dimensions: [("queue", depth.queue)])
                .record(depth.oldestAgeSeconds)
        }
        for queue in stale {
            Gauge(label: "courier_queue_due_jobs", dimensions: [("queue", queue)]).record(0)
            Gauge(label: "courier_queue_oldest_due_age_seconds", dimensions: [("queue", queue)]).record(0)
        }
    }
}

/// Outcomes written, by kind: what the worker's summary log line reports.
public struct OutcomeTally: Sendable, Equatable {
    /// Jobs that succeeded.
    public var succeeded = 0
    /// Failed attempts with a retry scheduled.
    public var retried = 0
    /// Jobs moved to the dead letters.
    public var dead = 0
    /// Jobs postponed by a receiver's 429/503 with Retry-After.
    public var postponed = 0
    /// Jobs parked by a 410 Gone.
    public var parked = 0

    /// An empty tally.
    public init() {}

    mutating func add(_ transition: JobTransition) {
        switch transition {
        case .succeed: succeeded += 1
        case .retry: retried += 1
        case .dead: dead += 1
        case .postpone: postponed += 1
        case .park: parked += 1
        }
    }

    /// What happened between `earlier` and this tally.
    public func since(_ earlier: OutcomeTally) -> OutcomeTally {
        var delta = OutcomeTally()
        delta.succeeded = succeeded - earlier.succeeded
        delta.retried = retried - earlier.retried
        delta.dead = dead - earlier.dead
        delta.postponed = postponed - earlier.postponed
        delta.parked = parked - earlier.parked
        return delta
    }
}
