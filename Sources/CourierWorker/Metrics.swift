import CourierCore
import Foundation
import Metrics

/// The worker's metrics, through swift-metrics (exported for Prometheus by `courier worker
/// --metrics-address`). Every name is in `help`, which the exporter prints as `# HELP`.
public final class WorkerMetrics: @unchecked Sendable {
    /// The help text of every metric the worker publishes, by name.
    public static let help: [String: String] = [
        "courier_claims_total": "Claim transactions run (each takes up to one batch of due jobs).",
        "courier_jobs_claimed_total": "Jobs claimed, by queue.",
        "courier_deliveries_total":
            "Attempts whose outcome was written, by queue, outcome (succeeded, retry, dead, postponed, parked) "
            + "and status class (2xx, 3xx, 4xx, 5xx, none for no response).",
        "courier_jobs_deferred_total": "Claimed jobs given back unsent because their queue was at its per-process cap.",
        "courier_jobs_rescued_total": "Running jobs whose lease expired, returned to retrying or moved to dead.",
        "courier_jobs_quarantined_total":
            "Jobs moved to the dead letters because the worker could not claim, read or record their row.",
        "courier_jobs_deleted_total":
            "Finished jobs deleted by retention, counted by the worker that held the maintenance lock.",
        "courier_delivery_duration_seconds": "Time from sending a request to knowing its outcome.",
        "courier_deliveries_in_flight": "Requests on the wire now (from sending until the response or failure).",
        "courier_body_budget_bytes_held":
            "Bytes of request bodies over 64 KiB this worker holds now, within its --body-budget.",
        "courier_body_budget_waiting": "Deliveries waiting for room in the body budget before their body is read.",
        "courier_queue_due_jobs": "Jobs due now, by queue (refreshed every maintenance pass).",
        "courier_queue_oldest_due_age_seconds": "Age of the oldest due job, by queue.",
        "courier_destinations_breaker_open": "Destinations whose circuit breaker is open or half-open.",
        "courier_destinations_disabled": "Destinations disabled by an operator or a 410 Gone.",
        "courier_destinations_running": "Jobs running at all destinations, across every worker.",
        "courier_endpoints_disabled": "Webhook endpoints disabled, by an operator or by their health.",
        "courier_http_connections_open":
            "Connections to receivers open or being opened, idle or busy, within --max-connections (refreshed every maintenance pass).",
        "courier_http_connections_idle": "Idle connections to receivers, kept for reuse (refreshed every maintenance pass).",
        "courier_http_connections_waiting":
            "Requests waiting for a connection because every one is busy at --max-connections (refreshed every maintenance pass).",
        "courier_http_connections_evicted_total":
            "Idle connections closed to make room for another host's under --max-connections; "
            + "steady growth means more hosts are in use than the budget holds.",
        "courier_endpoint_breakers_open":
            "Endpoints (webhook endpoints, or plain-job URLs without the query) whose own circuit breaker is open or half-open.",
    ]

    /// Claim transactions run.
    let claims = Counter(label: "courier_claims_total")
    /// Claimed jobs given back because their queue was at its per-process cap.
    let deferred = Counter(label: "courier_jobs_deferred_total")
    let rescued = Counter(label: "courier_jobs_rescued_total")
    let quarantined = Counter(label: "courier_jobs_quarantined_total")
    /// Finished jobs deleted by retention (by whichever worker held the maintenance lock).
    let retentionDeleted = Counter(label: "courier_jobs_deleted_total")
    let latency = Timer(label: "courier_delivery_duration_seconds")
    /// Requests on the wire now: a delivery counts from the moment it starts sending until its
    /// response (or failure) is known, not while its outcome waits to be written.
    let inFlight = Meter(label: "courier_deliveries_in_flight")
    /// Bytes of large bodies held within the body budget, and deliveries waiting for room.
    let bodyBytesHeld = Meter(label: "courier_body_budget_bytes_held")
    let bodyWaiting = Meter(label: "courier_body_budget_waiting")
    /// Idle connections closed under the connection budget (from the deliverer's running count).
    let connectionsEvicted = Counter(label: "courier_http_connections_evicted_total")

    private let lock = NSLock()
    private var written = 0
    private var evictedSeen = 0
    private var tallies = OutcomeTally()
    private var knownQueues: Set<String> = []
    private var claimedByQueue: [String: Counter] = [:]
    private var deliveries: [DeliveryKey: Counter] = [:]

    /// The labels of one `courier_deliveries_total` series.
    struct DeliveryKey: Hashable {
        var queue: String
        var outcome: String
        var statusClass: String
    }

    /// Outcomes written since start.
    var outcomesWritten: Int { lock.withLock { written } }

    /// Outcomes written since start, by kind.
    var outcomes: OutcomeTally { lock.withLock { tallies } }

    func wireStarted() { inFlight.increment() }
    func wireEnded() { inFlight.decrement() }

    /// Counts claimed jobs per queue.
    func claimed(_ jobs: [ClaimedJob]) {
        var perQueue: [String: Int] = [:]
        for job in jobs { perQueue[job.queue, default: 0] += 1 }
        for (queue, count) in perQueue {
            let counter = lock.withLock { () -> Counter in
                if let counter = claimedByQueue[queue] { return counter }
                let counter = Counter(label: "courier_jobs_claimed_total", dimensions: [("queue", queue)])
                claimedByQueue[queue] = counter
                return counter
            }
            counter.increment(by: count)
        }
    }

    /// Counts a batch's outcomes once they are written, `queues[i]` being the queue of
    /// `records[i]`: one lock for the batch and one counter update per run of outcomes with the
    /// same queue, outcome and status class (a batch is mostly one run).
    func record(_ records: [AttemptRecord], queues: [String]) {
        let runs = Self.deliveryRuns(records, queues: queues)
        let counters = lock.withLock { () -> [Counter] in
            written += records.count
            for record in records { tallies.add(record.transition) }
            return runs.map { run in
                if let counter = deliveries[run.key] { return counter }
                let counter = Counter(
                    label: "courier_deliveries_total",
                    dimensions: [("queue", run.key.queue), ("outcome", run.key.outcome), ("status_class", run.key.statusClass)])
                deliveries[run.key] = counter
                return counter
            }
        }
        for (counter, run) in zip(counters, runs) { counter.increment(by: run.count) }
    }

    /// The runs of outcomes with the same `courier_deliveries_total` labels in `records`, in
    /// order, `queues[i]` being the queue of `records[i]`.
    static func deliveryRuns(_ records: [AttemptRecord], queues: [String]) -> [(key: DeliveryKey, count: Int)] {
        precondition(records.count == queues.count, "one queue per record")
        var runs: [(key: DeliveryKey, count: Int)] = []
        for (record, queue) in zip(records, queues) {
            let key = DeliveryKey(
                queue: queue, outcome: Self.outcomeName(record.transition),
                statusClass: Self.statusClass(record.delivery.status))
            if let last = runs.last, last.key == key {
                runs[runs.count - 1].count += 1
            } else {
                runs.append((key, 1))
            }
        }
        return runs
    }

    /// The outcome of an attempt as logs and metrics name it.
    static func outcomeName(_ transition: JobTransition) -> String {
        switch transition {
        case .succeed: return "succeeded"
        case .retry: return "retry"
        case .dead: return "dead"
        case .postpone: return "postponed"
        case .park: return "parked"
        }
    }

    /// `2xx` ... `5xx`, or `none` when no response arrived.
    static func statusClass(_ status: Int?) -> String {
        switch status {
        case .some(100...199): return "1xx"
        case .some(200...299): return "2xx"
        case .some(300...399): return "3xx"
        case .some(400...499): return "4xx"
        case .some(500...599): return "5xx"
        default: return "none"
        }
    }

    /// Publishes how many destinations have an open breaker or are disabled, the requests
    /// running at them, and how many webhook endpoints are disabled (fleet-wide figures: every
    /// worker reports the same).
    func recordDestinations(_ health: DestinationHealth) {
        Gauge(label: "courier_destinations_breaker_open").record(health.breakerOpen)
        Gauge(label: "courier_destinations_disabled").record(health.disabled)
        Gauge(label: "courier_destinations_running").record(health.running)
        Gauge(label: "courier_endpoints_disabled").record(health.endpointsDisabled)
        Gauge(label: "courier_endpoint_breakers_open").record(health.endpointBreakersOpen)
    }

    /// Publishes the deliverer's connections: open, idle and waiting now, and the evictions
    /// since the last reading added to their counter.
    func recordConnections(_ connections: ConnectionStatistics) {
        Gauge(label: "courier_http_connections_open").record(connections.open)
        Gauge(label: "courier_http_connections_idle").record(connections.idle)
        Gauge(label: "courier_http_connections_waiting").record(connections.waiting)
        let added = lock.withLock { () -> Int in
            defer { evictedSeen = max(evictedSeen, connections.evicted) }
            return max(0, connections.evicted - evictedSeen)
        }
        if added > 0 { connectionsEvicted.increment(by: added) }
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
                .record(depth.oldestAge.inSeconds)
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
