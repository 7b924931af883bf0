import CourierCore
import Foundation
import Logging
import Postgres

/// One claim loop: a thread with its own PostgreSQL connection that claims due jobs, hands
/// them to the deliverer concurrently, and records their outcomes in batches.
///
/// Deliveries run as tasks; when one finishes it drops its record in this loop's mailbox and
/// signals the loop, which writes every record waiting in one `completeBatch` round trip. So
/// the busier the loop, the larger its batches.
final class ClaimLoop: @unchecked Sendable {
    private let index: Int
    private let databaseURL: String
    private let configuration: WorkerConfiguration
    private let slots: Int
    private let deliverer: any Deliverer
    private let limiter: InFlightLimiter
    private let logger: Logger
    private let metrics: WorkerMetrics

    private let condition = NSCondition()
    // Guarded by `condition`.
    private var inFlight: [Int64: (job: ClaimedJob, task: Task<Void, Never>?)] = [:]
    private var finished: [AttemptRecord] = []
    private var woken = true
    private var stopping = false
    private var done = false

    init(
        index: Int, databaseURL: String, configuration: WorkerConfiguration, slots: Int, deliverer: any Deliverer,
        limiter: InFlightLimiter, logger: Logger, metrics: WorkerMetrics
    ) {
        self.index = index
        self.databaseURL = databaseURL
        self.configuration = configuration
        self.slots = slots
        self.deliverer = deliverer
        self.limiter = limiter
        self.logger = logger
        self.metrics = metrics
    }

    /// Asks the loop to claim now (a notification arrived).
    func wake() {
        condition.withLock {
            woken = true
            condition.signal()
        }
    }

    /// Asks the loop to stop claiming, finish in-flight work within the grace period, give back
    /// the rest and exit.
    func stop() {
        condition.withLock {
            stopping = true
            condition.signal()
        }
    }

    /// Blocks until the loop has exited.
    func waitUntilDone() {
        condition.withLock {
            while !done { condition.wait() }
        }
    }

    /// While draining a backlog, claim again only once this many slots are free: every claim
    /// is a round trip and a commit, so refilling one slot at a time would cost a claim per
    /// job. A notification or the poll still claims for any free slot, which keeps a lone new
    /// job fast.
    private var refillThreshold: Int { max(1, min(configuration.batchSize, slots / 4)) }

    /// Jobs in flight now.
    var inFlightCount: Int { condition.withLock { inFlight.count } }

    /// The loop body; runs on its own thread until stopped.
    func run() {
        defer {
            condition.withLock {
                done = true
                condition.broadcast()
            }
        }
        var connection: PostgresConnection? = nil
        var lastClaim = DispatchTime(uptimeNanoseconds: 0)
        var lastHeartbeat = DispatchTime.now()
        var lastClaimWasFull = false
        var backoff = DatabaseBackoff()
        var stopDeadline: DispatchTime? = nil

        while true {
            // 1. Take what the deliveries left in the mailbox, and the flags.
            condition.lock()
            let records = finished
            finished.removeAll(keepingCapacity: true)
            let free = slots - inFlight.count
            let wasWoken = woken
            woken = false
            let isStopping = stopping
            let heldIDs = inFlight.keys.map { $0 }
            condition.unlock()

            do {
                if connection == nil || connection?.isOpen == false {
                    connection = try openConnection(existing: connection)
                    backoff.reset()
                }
                let store = JobStore(connection: connection!, workerID: configuration.workerID)

                // 2. Record finished attempts in one round trip.
                if !records.isEmpty {
                    let changed = try store.complete(records)
                    if changed.count < records.count {
                        logger.warning(
                            "outcomes arrived after their lease was lost; the jobs were rescued meanwhile",
                            metadata: ["worker.loop": "\(index)", "jobs.count": "\(records.count - changed.count)"])
                    }
                }

                // 3. Stopping: wait for in-flight work until the grace period ends, then give back the rest.
                if isStopping {
                    if stopDeadline == nil {
                        stopDeadline = .now() + configuration.gracePeriod
                    }
                    if heldIDs.isEmpty && records.isEmpty { break }
                    if DispatchTime.now() >= stopDeadline! {
                        try giveBackUnfinished(store)
                        break
                    }
                } else {
                    // 4. Claim when there is room and a reason: a notification, the poll interval,
                    // or a full previous batch (more may be waiting).
                    let pollDue = DispatchTime.now() >= lastClaim + configuration.pollInterval
                    if free > 0 && (wasWoken || pollDue || (lastClaimWasFull && free >= refillThreshold)) {
                        let limit = min(free, configuration.batchSize)
                        let jobs = try store.claim(
                            queues: configuration.queues, limit: limit,
                            leaseMilliseconds: Int(configuration.leaseDuration * 1000))
                        lastClaim = .now()
                        lastClaimWasFull = jobs.count == limit
                        if !jobs.isEmpty { try start(jobs, store: store) }
                    }
                }

                // 5. Heartbeat: extend the leases of everything in flight.
                if DispatchTime.now() >= lastHeartbeat + configuration.heartbeatInterval {
                    lastHeartbeat = .now()
                    let held = condition.withLock { inFlight.keys.map { $0 } }
                    let kept = try store.heartbeat(held, leaseMilliseconds: Int(configuration.leaseDuration * 1000))
                    if kept.count < held.count {
                        logger.warning(
                            "lost the lease of running jobs; another worker may run them again",
                            metadata: ["worker.loop": "\(index)", "jobs.count": "\(held.count - kept.count)"])
                    }
                }
            } catch {
                // Keep the outcomes: they are written once the database is back.
                condition.withLock { finished.insert(contentsOf: records, at: 0) }
                let delay = backoff.next()
                logger.warning(
                    "database error in claim loop; retrying",
                    metadata: [
                        "worker.loop": "\(index)", "error": "\(error)", "retry.delay_s": "\(String(format: "%.2f", delay))",
                    ])
                if let pgError = error as? PostgresError, pgError.isConnectionError {
                    connection?.close()
                }
                if isStopping, let stopDeadline, DispatchTime.now() >= stopDeadline + 5 {
                    logger.error("giving up recording outcomes at shutdown; leases will expire and be rescued")
                    break
                }
                condition.withLock { _ = condition.wait(until: Date().addingTimeInterval(delay)) }
                continue
            }

            // 6. Sleep until something happens: a delivery finishes, a notification, the next
            // poll or heartbeat, or a stop.
            condition.lock()
            if finished.isEmpty && !woken && !(stopping && !isStopping)
                && !(lastClaimWasFull && slots - inFlight.count >= refillThreshold)
            {
                let nextPoll = lastClaim + configuration.pollInterval
                let nextBeat = lastHeartbeat + configuration.heartbeatInterval
                let wakeAt = min(nextPoll.uptimeNanoseconds, nextBeat.uptimeNanoseconds)
                let now = DispatchTime.now().uptimeNanoseconds
                if wakeAt > now {
                    _ = condition.wait(until: Date().addingTimeInterval(Double(wakeAt - now) / 1e9))
                }
            }
            condition.unlock()
        }
        connection?.close()
    }

    private func openConnection(existing: PostgresConnection?) throws -> PostgresConnection {
        if let existing {
            try existing.reconnect()
            logger.info("reconnected to PostgreSQL", metadata: ["worker.loop": "\(index)"])
            return existing
        }
        return try PostgresConnection(databaseURL, applicationName: "courier-worker")
    }

    /// Starts deliveries for jobs whose host and queue have room; gives the others back.
    private func start(_ jobs: [ClaimedJob], store: JobStore) throws {
        metrics.claimed.increment(by: jobs.count)
        var deferred: [(id: Int64, attempt: Int)] = []
        for job in jobs {
            let host = job.host
            guard limiter.tryAcquire(host: host, queue: job.queue, queueLimit: job.queueMaxInFlight) else {
                deferred.append((job.id, job.attempt))
                continue
            }
            condition.withLock { inFlight[job.id] = (job, nil) }
            metrics.inFlight.record(limiter.inFlight(host: host))
            let task = Task { [deliverer, limiter, metrics] in
                let startedAt = Date()
                let report = await deliverer.deliver(job)
                let finishedAt = Date()
                limiter.release(host: host, queue: job.queue)
                let transition = JobTransition.decide(
                    result: report.result, attempt: job.attempt, maxAttempts: job.maxAttempts, schedule: job.schedule,
                    random: Double.random(in: 0..<1))
                metrics.record(transition)
                metrics.latency.recordSeconds(finishedAt.timeIntervalSince(startedAt))
                self.finish(
                    AttemptRecord(
                        jobID: job.id, attempt: job.attempt, transition: transition, result: report.result,
                        startedAt: startedAt, finishedAt: finishedAt, responseExcerpt: report.responseExcerpt))
            }
            condition.withLock {
                if inFlight[job.id] != nil { inFlight[job.id]?.task = task }
            }
        }
        if !deferred.isEmpty {
            metrics.deferred.increment(by: deferred.count)
            try store.release(deferred, delayMilliseconds: Int(configuration.capDeferral * 1000))
        }
    }

    private func finish(_ record: AttemptRecord) {
        condition.withLock {
            inFlight[record.jobID] = nil
            finished.append(record)
            condition.signal()
        }
    }

    /// At the end of the grace period: cancels what is still in flight and gives the jobs back
    /// so another worker runs them at once.
    private func giveBackUnfinished(_ store: JobStore) throws {
        let unfinished = condition.withLock { () -> [(job: ClaimedJob, task: Task<Void, Never>?)] in
            let values = Array(inFlight.values)
            inFlight.removeAll()
            finished.removeAll()
            return values
        }
        unfinished.forEach { $0.task?.cancel() }
        let released = try store.release(unfinished.map { ($0.job.id, $0.job.attempt) }, delayMilliseconds: 0)
        logger.warning(
            "grace period over; gave unfinished jobs back",
            metadata: ["worker.loop": "\(index)", "jobs.count": "\(released)"])
    }
}

/// Reconnect delays: 0.1 s doubling to 5 s, with jitter.
struct DatabaseBackoff {
    private var attempt = 0

    mutating func next() -> Double {
        defer { attempt += 1 }
        let base = min(5.0, 0.1 * pow(2.0, Double(attempt)))
        return base * Double.random(in: 0.75...1.25)
    }

    mutating func reset() { attempt = 0 }
}
