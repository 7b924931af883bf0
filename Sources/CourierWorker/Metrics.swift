import CourierCore
import Metrics

/// The worker's metrics, through swift-metrics (exported for Prometheus by `courier worker
/// --metrics-port`).
struct WorkerMetrics: Sendable {
    let claimed = Counter(label: "courier_jobs_claimed_total")
    let succeeded = Counter(label: "courier_jobs_succeeded_total")
    let retried = Counter(label: "courier_jobs_retried_total")
    let dead = Counter(label: "courier_jobs_dead_total")
    let deferred = Counter(label: "courier_jobs_deferred_total")
    let rescued = Counter(label: "courier_jobs_rescued_total")
    let latency = Timer(label: "courier_delivery_duration_seconds")
    let inFlight = Gauge(label: "courier_deliveries_in_flight")

    func record(_ transition: JobTransition) {
        switch transition {
        case .succeed: succeeded.increment()
        case .retry: retried.increment()
        case .dead: dead.increment()
        }
    }
}
