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
    /// Claimed jobs given back because their host or queue was at its cap.
    let deferred = Counter(label: "courier_jobs_deferred_total")
    let rescued = Counter(label: "courier_jobs_rescued_total")
    /// Finished jobs deleted by retention (by whichever worker held the maintenance lock).
    let retentionDeleted = Counter(label: "courier_jobs_deleted_total")
    let latency = Timer(label: "courier_delivery_duration_seconds")
    /// Requests on the wire now: a delivery counts from the moment it starts sending until its
    /// response (or failure) is known, not while its outcome waits to be written.
    let inFlight = Meter(label: "courier_deliveries_in_flight")

    private let lock = NSLock()
    private var written = 0
    private var knownQueues: Set<String> = []

    /// Outcomes written since start.
    var outcomesWritten: Int { lock.withLock { written } }

    func wireStarted() { inFlight.increment() }
    func wireEnded() { inFlight.decrement() }

    /// Counts an outcome once it is written.
    func record(_ transition: JobTransition) {
        lock.withLock { written += 1 }
        switch transition {
        case .succeed: succeeded.increment()
        case .retry: retried.increment()
        case .dead: dead.increment()
        }
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
