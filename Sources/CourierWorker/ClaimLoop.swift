import CourierCore
import Dispatch
import Foundation
import Logging
import Postgres

/// One claim loop: the I/O shell around a `ClaimLoopMachine`.
///
/// Everything the loop does runs on its own serial `DispatchQueue`: machine events, the
/// blocking libpq statements on the loop's own connection, and a Dispatch timer for the
/// sleeps the machine asks for. Deliveries run as tasks on the pooled transport's SwiftNIO
/// event loops and never touch the connection: each drops its outcome in the loop's mailbox, and one queued
/// block hands everything waiting there to the machine, so the busier the loop, the larger its
/// `completeBatch` writes. No libpq call ever runs inside a Swift task.
final class ClaimLoop: @unchecked Sendable {
    let index: Int
    private let connect: @Sendable () throws -> PostgresConnection
    private let configuration: WorkerConfiguration
    private let deliverer: any Deliverer
    private let limiter: InFlightLimiter
    private let bodies: PendingBodies
    private let logger: Logger
    private let metrics: WorkerMetrics
    private let queue: DispatchQueue
    private var timer: (any DispatchSourceTimer)?
    private let done = DispatchGroup()

    // Only touched on `queue`.
    private var machine: ClaimLoopMachine
    private var connection: PostgresConnection?
    /// Where the last claim's round of the lanes ended; the next claim goes on from there.
    private var claimCursor: WorkerStatements.Lane?
    /// The jobs being delivered, by reference: one entry per started delivery.
    private var running: [JobRef: RunningJob] = [:]
    /// The loop's jitter and each delivery's draw for its retry delay: seeded once from the
    /// system's generator, whose every draw is a `getrandom(2)` call (one per delivery was
    /// 0.7 % of a worker's CPU).
    private var random = SplitMix64(seed: UInt64.random(in: .min ... .max))
    private var started = false

    // Guarded by `lock`: written by deliveries and read by the pool from other threads.
    private let lock = NSLock()
    private var mailbox: [AttemptRecord] = []
    private var drainScheduled = false
    private var lastAlive: Duration = ClaimLoop.now()
    private var inFlightNow = 0
    private var finishedLoop = false

    init(
        index: Int, connect: @escaping @Sendable () throws -> PostgresConnection, configuration: WorkerConfiguration,
        slots: Int, deliverer: any Deliverer, limiter: InFlightLimiter, bodies: PendingBodies, logger: Logger,
        metrics: WorkerMetrics
    ) {
        self.index = index
        self.connect = connect
        self.configuration = configuration
        self.deliverer = deliverer
        self.limiter = limiter
        self.bodies = bodies
        var logger = logger
        logger[metadataKey: "worker.loop"] = "\(index)"
        self.logger = logger
        self.metrics = metrics
        queue = DispatchQueue(label: "courier.claim-loop.\(index)")
        machine = ClaimLoopMachine(
            settings: .init(
                slots: slots, batchSize: configuration.batchSize,
                pollInterval: configuration.pollInterval,
                heartbeatInterval: configuration.heartbeatInterval,
                gracePeriod: configuration.gracePeriod,
                giveUpAfter: configuration.shutdownGiveUp,
                deferral: configuration.capDeferral),
            now: Self.now())
    }

    /// The machine's clock: `DispatchTime`'s uptime, the clock its timer is set on.
    static func now() -> Duration { .nanoseconds(DispatchTime.now().uptimeNanoseconds) }

    /// Opens the loop's connection now, so a worker is ready only when every loop can reach
    /// the database. Call before `start()`.
    func connectNow() throws {
        try queue.sync {
            if connection == nil { connection = try connect() }
        }
    }

    /// Starts the loop: the first event claims at once.
    func start() {
        // The group and the timer exist only once the loop runs: Dispatch traps on a group left
        // entered, or a timer never resumed, when they are freed.
        done.enter()
        queue.async { [self] in
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.setEventHandler { [weak self] in self?.send(.tick) }
            timer.schedule(deadline: .distantFuture)
            timer.resume()
            self.timer = timer
            started = true
            send(.tick)
        }
    }

    /// Asks the loop to claim now (a notification arrived).
    func wake() { queue.async { [self] in send(.notified) } }

    /// Asks the loop to stop claiming, let in-flight deliveries finish within the grace
    /// period, write every known outcome and exit.
    func stop() { queue.async { [self] in send(.stopRequested) } }

    /// Blocks until the loop has exited (at once if it never started).
    func waitUntilDone() { done.wait() }

    /// Deliveries of this loop on the wire or waiting for their outcome to be written.
    var inFlightCount: Int { lock.withLock { inFlightNow } }

    /// Queues a no-op that stamps the loop as alive: a loop blocked in a statement cannot run
    /// it, which is how the watchdog tells a stuck loop from an idle one.
    func ping() {
        queue.async { [self] in touch() }
    }

    /// True when the loop ran something within the last `window`, or has exited.
    func isResponsive(within window: Duration) -> Bool {
        let now = Self.now()
        return lock.withLock { finishedLoop || now - lastAlive <= window }
    }

    private func touch() {
        let now = Self.now()
        lock.withLock { lastAlive = now }
    }

    // MARK: The shell

    /// Hands one event to the machine and runs the resulting actions, feeding each statement's
    /// result back as the next event. Runs on `queue` only.
    private func send(_ first: LoopEvent) {
        guard started, !machine.hasExited else { return }
        touch()
        var pending: [LoopAction] = machine.handle(
            first, now: Self.now(), jitter: Double.random(in: 0.75...1.25, using: &random))
        while !pending.isEmpty {
            let action = pending.removeFirst()
            var follow: LoopEvent?
            switch action {
            case .run(let statement):
                follow = execute(statement)
            case .cancelDeliveries(let refs):
                for ref in refs {
                    running[ref]?.task?.cancel()
                    running[ref]?.task = nil
                }
            case .interrupt(let refs):
                follow = .finished(refs.compactMap(interruptedRecord), interrupted: true)
                logger.warning(
                    "grace period over; deliveries still in flight are recorded as interrupted and due again",
                    metadata: ["jobs.count": "\(refs.count)"])
            case .sleep(let until):
                timer?.schedule(
                    deadline: until.map { DispatchTime(uptimeNanoseconds: UInt64(max(0, $0.inNanoseconds))) }
                        ?? .distantFuture)
            case .exit:
                finish()
                return
            }
            if let follow {
                touch()
                pending += machine.handle(
                    follow, now: Self.now(), jitter: Double.random(in: 0.75...1.25, using: &random))
            }
        }
    }

    private func finish() {
        timer?.cancel()
        connection?.close()
        connection = nil
        lock.withLock { finishedLoop = true }
        if machine.stopDeadline != nil && (!machine.unwritten.isEmpty || !machine.inFlight.isEmpty) {
            logger.error(
                "gave up writing outcomes at shutdown (database unreachable); their leases will expire and be rescued",
                metadata: ["jobs.count": "\(machine.unwritten.count + machine.inFlight.count)"])
        }
        done.leave()
    }

    /// Runs one statement on the loop's connection and says how it went.
    private func execute(_ statement: LoopStatement) -> LoopEvent {
        do {
            if connection == nil || connection?.isOpen == false {
                connection?.close()
                connection = try connect()
                logger.info("connected to PostgreSQL")
            }
            let store = JobStore(
                connection: connection!, workerID: configuration.workerID, endpointDisable: configuration.endpointDisable)
            switch statement {
            case .claim(let limit):
                let claim = try store.claimBatch(
                    queues: configuration.queues, limit: limit,
                    lease: configuration.leaseDuration,
                    perHostLimit: configuration.perHostLimit, after: claimCursor)
                claimCursor = claim.cursor
                metrics.claims.increment()
                for quarantined in claim.quarantined {
                    metrics.quarantined.increment()
                    logger.warning(
                        "job moved to the dead letters: the worker cannot handle its row",
                        metadata: ["job.id": "\(quarantined.id)", "error": "\(quarantined.reason)"])
                }
                return startDeliveries(claim.jobs, requested: limit, heldBack: claim.heldBack)
            case .record(let records):
                let outcome = try store.recordOutcomes(records)
                for quarantined in outcome.quarantined {
                    metrics.quarantined.increment()
                    logger.warning(
                        "job moved to the dead letters: its outcome could not be written",
                        metadata: ["job.id": "\(quarantined.id)", "error": "\(quarantined.reason)"])
                }
                if outcome.changed.count + outcome.quarantined.count < records.count {
                    logger.warning(
                        "outcomes arrived after their lease was lost; the jobs were rescued meanwhile",
                        metadata: [
                            "jobs.count": "\(records.count - outcome.changed.count - outcome.quarantined.count)"
                        ])
                }
                var queues: [String] = []
                queues.reserveCapacity(records.count)
                for record in records {
                    let job = running.removeValue(forKey: record.job)
                    queues.append(job?.queue ?? "?")
                    if case .dead(let reason) = record.transition, outcome.changed.contains(record.jobID) {
                        logger.warning(
                            "job moved to the dead letters",
                            metadata: [
                                "job.id": "\(record.jobID)", "job.queue": "\(job?.queue ?? "?")",
                                "job.host": "\(record.host)", "job.attempt": "\(record.attempt)",
                                "error": "\(Redaction.message(reason))",
                            ])
                    }
                }
                metrics.record(records, queues: queues)
                lock.withLock { inFlightNow -= records.count }
                return .succeeded(statement, lost: [])
            case .heartbeat(let refs):
                let kept = try store.heartbeat(refs.map(\.id), lease: configuration.leaseDuration)
                let lost = refs.filter { !kept.contains($0.id) }
                if !lost.isEmpty {
                    logger.warning(
                        "lost the lease of running jobs; another worker may run them again",
                        metadata: ["jobs.count": "\(lost.count)"])
                }
                return .succeeded(statement, lost: lost)
            case .release(let refs, let delay):
                try store.release(refs.map { ($0.id, $0.attempt) }, delay: delay)
                metrics.deferred.increment(by: refs.count)
                for ref in refs { running[ref] = nil }
                return .succeeded(statement, lost: [])
            }
        } catch {
            let broken = (error as? PostgresError)?.isConnectionError ?? false
            if broken {
                connection?.close()
                connection = nil
            }
            logger.warning(
                "statement failed in claim loop; retrying after a delay",
                metadata: ["statement": "\(statement.name)", "error": "\(Self.loggable(error))"])
            return .failed(statement, connection: broken)
        }
    }

    /// Starts a delivery for each claimed job whose queue has room (the claim already kept
    /// every destination within its caps).
    private func startDeliveries(_ claimed: [ClaimedJob], requested: Int, heldBack: Bool) -> LoopEvent {
        metrics.claimed(claimed)
        var startedRefs: [JobRef] = []
        var deferred: [JobRef] = []
        for job in claimed {
            let ref = JobRef(id: job.id, attempt: job.attempt)
            guard limiter.tryAcquire(queue: job.queue, queueLimit: job.queueMaxInFlight) else {
                deferred.append(ref)
                continue
            }
            startedRefs.append(ref)
            let draw = Double.random(in: 0..<1, using: &random)
            let task = Task { [deliverer, limiter, bodies, metrics, logger, weak self] in
                // A body the claim left in PostgreSQL is read now, within the body budget; the
                // loop's own copy of the job never holds it.
                var sending = job
                var holding = 0
                var refused: Delivery?
                if job.bodyPending {
                    switch await bodies.prepare(job) {
                    case .ready(let ready, let bytes): (sending, holding) = (ready, bytes)
                    case .failed(let delivery): refused = delivery
                    }
                }
                metrics.wireStarted()
                let startedAt = Date()
                let delivery: Delivery
                if let refused {
                    delivery = refused
                } else {
                    delivery = await deliverer.deliver(sending)
                }
                let finishedAt = Date()
                metrics.wireEnded()
                bodies.release(holding)
                limiter.release(queue: job.queue)
                let transition = JobTransition.decide(
                    delivery, attempt: job.attempt, maxAttempts: job.maxAttempts, schedule: job.schedule,
                    postponements: job.postponements, parkOnGone: job.parkOnGone, random: draw)
                metrics.latency.recordSeconds(finishedAt.timeIntervalSince(startedAt))
                logger.debug(
                    "delivery finished",
                    metadata: [
                        "job.id": "\(job.id)", "job.queue": "\(job.queue)", "job.host": "\(job.host)",
                        "job.attempt": "\(job.attempt)", "http.status": "\(delivery.status.map(String.init) ?? "-")",
                        "outcome": "\(WorkerMetrics.outcomeName(transition))",
                        "duration_ms": "\(Int(finishedAt.timeIntervalSince(startedAt) * 1000))",
                    ])
                self?.post(
                    AttemptRecord(
                        jobID: job.id, attempt: job.attempt, transition: transition, delivery: delivery,
                        startedAt: startedAt, finishedAt: finishedAt, host: job.host))
            }
            running[ref] = RunningJob(
                queue: job.queue, host: job.host, maxAttempts: job.maxAttempts, schedule: job.schedule, task: task)
        }
        lock.withLock { inFlightNow += startedRefs.count }
        return .claimed(started: startedRefs, deferred: deferred, requested: requested, heldBack: heldBack)
    }

    /// Called by a finished delivery on whatever thread it ran: leaves the outcome in the
    /// mailbox and makes sure one block is queued to hand the mailbox to the machine.
    private func post(_ record: AttemptRecord) {
        let schedule = lock.withLock { () -> Bool in
            mailbox.append(record)
            if drainScheduled { return false }
            drainScheduled = true
            return true
        }
        guard schedule else { return }
        queue.async { [self] in
            let records = lock.withLock { () -> [AttemptRecord] in
                drainScheduled = false
                defer { mailbox.removeAll(keepingCapacity: true) }
                return mailbox
            }
            send(.finished(records, interrupted: false))
        }
    }

    /// The outcome of a delivery cut off by the end of the grace period: a failed attempt,
    /// due again at once (or dead when it was the last attempt).
    private func interruptedRecord(_ ref: JobRef) -> AttemptRecord? {
        guard let job = running[ref] else { return nil }
        // The receiver did nothing wrong: the verdict of `.interrupted` says nothing about it.
        let delivery = Delivery.failure(
            .interrupted, error: "interrupted: the worker stopped before the response arrived")
        var transition = JobTransition.decide(
            delivery, attempt: ref.attempt, maxAttempts: job.maxAttempts, schedule: job.schedule, random: 0.5)
        if case .retry = transition { transition = .retry(delay: .zero) }
        let now = Date()
        return AttemptRecord(
            jobID: ref.id, attempt: ref.attempt, transition: transition, delivery: delivery, startedAt: now,
            finishedAt: now, host: job.host)
    }
}

extension ClaimLoop {
    /// An error as it may be logged: the server's message and SQLSTATE without DETAIL (which
    /// can quote a whole row, headers and body included), through `Redaction.message`.
    static func loggable(_ error: any Error) -> String {
        if let error = error as? PostgresError {
            return Redaction.message(error.sqlState.map { "\(error.message) (SQLSTATE \($0))" } ?? error.message)
        }
        return Redaction.message("\(error)")
    }
}

extension LoopStatement {
    /// A short name for logs.
    var name: String {
        switch self {
        case .claim: return "claim"
        case .record: return "record"
        case .heartbeat: return "heartbeat"
        case .release: return "release"
        }
    }
}

/// What the claim loop keeps of a job whose delivery it started: what the outcome's metrics and
/// log lines and an interrupted attempt's record need, and the delivery's task, for cancelling
/// it. Not the whole job: its URL, headers and body stay with the delivery.
private struct RunningJob {
    var queue: String
    var host: String
    var maxAttempts: Int
    var schedule: RetrySchedule
    var task: Task<Void, Never>?
}
