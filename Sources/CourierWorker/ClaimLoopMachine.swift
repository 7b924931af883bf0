import CourierCore

/// A claimed job as the claim loop tracks it: enough to guard every later statement.
public struct JobRef: Sendable, Hashable {
    /// Job id.
    public var id: Int64
    /// The attempt number the claim gave it.
    public var attempt: Int

    /// Creates a reference.
    public init(id: Int64, attempt: Int) {
        self.id = id
        self.attempt = attempt
    }
}

extension AttemptRecord {
    /// The job and attempt this outcome belongs to.
    public var job: JobRef { JobRef(id: jobID, attempt: attempt) }
}

/// The statements a claim loop runs, one at a time on its connection.
public enum LoopStatement: Sendable, Equatable {
    /// Claim up to `limit` due jobs.
    case claim(limit: Int)
    /// Write these outcomes (job transitions and attempt rows).
    case record([AttemptRecord])
    /// Extend the leases of these running jobs.
    case heartbeat([JobRef])
    /// Give back claimed jobs that were never sent, due again after `delay`.
    case release([JobRef], delay: Duration)
}

/// Something that happened to a claim loop; the machine's only input.
public enum LoopEvent: Sendable, Equatable {
    /// Deliveries finished with these outcomes. `interrupted` marks the outcomes the shell made,
    /// when told to by `.interrupt`, for deliveries still in flight at the end of the grace period.
    case finished([AttemptRecord], interrupted: Bool)
    /// A `NOTIFY` said due jobs may have arrived.
    case notified
    /// A timer the machine asked for fired (or any wake-up without news).
    case tick
    /// The process is stopping (SIGTERM).
    case stopRequested
    /// The claim returned: deliveries started for `started`; `deferred` could not start (their
    /// queue was at its per-process cap) and must be given back; `requested` is what was asked;
    /// `heldBack`: some destination with due jobs was at its in-flight cap, so an outcome
    /// written (which frees room there) is a reason to claim again.
    case claimed(started: [JobRef], deferred: [JobRef], requested: Int, heldBack: Bool = false)
    /// A statement other than the claim succeeded. For a heartbeat, `lost` are the jobs whose
    /// lease was no longer held.
    case succeeded(LoopStatement, lost: [JobRef])
    /// A statement failed. `connection` says the connection broke (or hung); otherwise the
    /// server refused the statement. Either way nothing of it is assumed written.
    case failed(LoopStatement, connection: Bool)
}

/// What the loop's shell must do next.
public enum LoopAction: Sendable, Equatable {
    /// Run this statement now; report `.claimed`, `.succeeded` or `.failed`.
    case run(LoopStatement)
    /// Cancel these deliveries (the grace period ended); their outcomes are already decided.
    case cancelDeliveries([JobRef])
    /// For each of these jobs, make the outcome "the worker stopped before the response arrived"
    /// and report it at once as `.finished(_, interrupted: true)`.
    case interrupt([JobRef])
    /// Nothing to do until an event arrives or, when set, until this instant of the monotonic
    /// clock (see ``ClaimLoopMachine``).
    case sleep(until: Duration?)
    /// Close the connection and end the loop.
    case exit
}

/// The decisions of one claim loop, free of clocks and I/O: it takes one event and the current
/// time and returns the actions to run. Times are instants of a monotonic clock, given as the
/// `Duration` since its origin (the shell uses `DispatchTime`'s uptime; tests count from zero). The shell (`ClaimLoop`) runs one statement at a time,
/// reports each result back as an event, and sleeps as told.
///
/// What it guarantees (each is a unit test in `ClaimLoopMachineTests`):
/// - With no free slot it does not claim and sleeps until the next heartbeat or event: never a
///   busy loop.
/// - Every outcome is written exactly once: an outcome leaves the mailbox only when its
///   `record` statement succeeded, and a later failure cannot put it back.
/// - Give-back touches only jobs without a known outcome, after the known outcomes are written.
/// - A stop with the database down ends after the grace period plus `giveUpAfter`, leaving the
///   leases to the rescuer.
/// - A failing statement is retried after a growing delay, never in a tight loop; jobs that
///   could not start are given back, never claimed again at once.
public struct ClaimLoopMachine: Sendable {
    /// Fixed settings of one loop.
    public struct Settings: Sendable, Equatable {
        /// Deliveries this loop may have in flight.
        public var slots: Int
        /// The most jobs one claim takes.
        public var batchSize: Int
        /// Claim at least this often while slots are free.
        public var pollInterval: Duration
        /// Extend leases this often while jobs are in flight.
        public var heartbeatInterval: Duration
        /// How long in-flight deliveries may run after a stop.
        public var gracePeriod: Duration
        /// After the grace period, how long the loop keeps retrying to write outcomes before it
        /// gives up and leaves the leases to the rescuer.
        public var giveUpAfter: Duration
        /// Delay before a job that could not start is due again.
        public var deferral: Duration

        /// Creates settings.
        public init(
            slots: Int, batchSize: Int, pollInterval: Duration, heartbeatInterval: Duration, gracePeriod: Duration,
            giveUpAfter: Duration = .seconds(5), deferral: Duration = .milliseconds(250)
        ) {
            self.slots = max(1, slots)
            self.batchSize = max(1, batchSize)
            self.pollInterval = pollInterval
            self.heartbeatInterval = heartbeatInterval
            self.gracePeriod = gracePeriod
            self.giveUpAfter = giveUpAfter
            self.deferral = deferral
        }

        /// While draining a backlog, claim again only once this many slots are free: every claim
        /// is a round trip and a commit, so refilling one slot at a time would cost a claim per
        /// job. A notification or the poll still claims for any free slot, which keeps a lone
        /// new job fast.
        var refillThreshold: Int { max(1, min(batchSize, slots / 4)) }
    }

    /// The loop's settings.
    public let settings: Settings

    /// Jobs whose delivery is running and whose outcome is not known yet.
    public private(set) var inFlight: Set<JobRef> = []
    /// Outcomes known and not yet written, in arrival order.
    public private(set) var unwritten: [AttemptRecord] = []
    /// Claimed jobs that never started and must be given back.
    public private(set) var toRelease: [JobRef] = []
    /// Jobs whose outcome the machine decided at shutdown; a late real outcome is dropped.
    private var abandoned: Set<JobRef> = []
    /// The statement running now, if any (the shell runs one at a time).
    public private(set) var running: LoopStatement?

    private var woken = true
    private var lastClaimFull = false
    private var lastClaimHeldBack = false
    private var roomFreed = false
    private var nextPoll: Duration = .zero
    private var nextHeartbeat: Duration
    private var failures = 0
    private var retryAt: Duration = .zero
    /// Set when a stop was asked: the end of the grace period.
    public private(set) var stopDeadline: Duration?
    private var exited = false

    /// Creates a machine at time `now`.
    public init(settings: Settings, now: Duration) {
        self.settings = settings
        nextHeartbeat = now + settings.heartbeatInterval
    }

    /// Slots free for new deliveries.
    public var freeSlots: Int { settings.slots - inFlight.count }

    /// True once the machine said `.exit`.
    public var hasExited: Bool { exited }

    /// The delay before the `failures`-th retry of a failed statement: 0.1 s doubling to 5 s,
    /// scaled by `jitter` (a factor around 1, e.g. in 0.75...1.25).
    public static func retryDelay(failures: Int, jitter: Double) -> Duration {
        statementBackoff.baseDelay(afterFailure: failures) * jitter
    }

    /// 0.1 s doubling to 5 s: the claim loops' statement retries and the listener's reconnect.
    static let statementBackoff = Backoff.exponential(initial: .milliseconds(100), base: 2, maximum: .seconds(5))

    /// Takes one event at time `now` and returns what to do. `jitter` scales retry delays.
    public mutating func handle(_ event: LoopEvent, now: Duration, jitter: Double = 1) -> [LoopAction] {
        guard !exited else { return [] }
        var actions: [LoopAction] = []
        switch event {
        case .finished(let records, let interrupted):
            for record in records {
                let job = record.job
                // A delivery abandoned at shutdown already has its outcome queued or written.
                if abandoned.contains(job) != interrupted { continue }
                inFlight.remove(job)
                unwritten.append(record)
            }
        case .notified:
            woken = true
        case .tick:
            break
        case .stopRequested:
            if stopDeadline == nil { stopDeadline = now + settings.gracePeriod }
        case .claimed(let started, let deferred, let requested, let heldBack):
            running = nil
            failures = 0
            if unwritten.isEmpty {
                inFlight.formUnion(started)
            } else {
                // A delivery may finish before the claim's answer is handled.
                let known = Set(unwritten.map(\.job))
                inFlight.formUnion(started.filter { !known.contains($0) })
            }
            toRelease.append(contentsOf: deferred)
            lastClaimFull = started.count + deferred.count >= requested
            lastClaimHeldBack = heldBack
            nextPoll = now + settings.pollInterval
        case .succeeded(let statement, _):
            running = nil
            failures = 0
            switch statement {
            case .record(let records):
                let written = Set(records.map(\.job))
                unwritten.removeAll { written.contains($0.job) }
                // Written outcomes free room at their destinations in the database.
                if lastClaimHeldBack { roomFreed = true }
            case .release(let jobs, _):
                let released = Set(jobs)
                toRelease.removeAll { released.contains($0) }
            case .heartbeat:
                nextHeartbeat = now + settings.heartbeatInterval
            case .claim:
                break
            }
        case .failed(let statement, _):
            running = nil
            failures += 1
            retryAt = now + Self.retryDelay(failures: failures, jitter: jitter)
            switch statement {
            case .claim:
                // A failed claim changed nothing; try again after the delay, not at once.
                nextPoll = retryAt
                lastClaimFull = false
            case .heartbeat:
                nextHeartbeat = retryAt
            case .record, .release:
                break
            }
        }
        actions += next(now: now)
        return actions
    }

    private mutating func next(now: Duration) -> [LoopAction] {
        if running != nil { return [] }
        var actions: [LoopAction] = []

        if let deadline = stopDeadline {
            if failures > 0 && now >= deadline + settings.giveUpAfter {
                // The database has been failing past the grace period: leave the leases to the
                // rescuer rather than hang the shutdown.
                exited = true
                return [.exit]
            }
            if now >= deadline && !inFlight.isEmpty {
                // The grace period is over: decide the outcome of what is still in flight (an
                // interrupted attempt, due again at once) and stop those deliveries.
                let interrupted = inFlight.sorted { $0.id < $1.id }
                inFlight.removeAll()
                abandoned.formUnion(interrupted)
                return [.cancelDeliveries(interrupted), .interrupt(interrupted)]
            }
        }

        if failures > 0 && now < retryAt {
            actions.append(.sleep(until: retryAt))
            return actions
        }

        // 1. Outcomes first: they free nothing in the database until written, and a give-back
        //    must never overtake them.
        if !unwritten.isEmpty {
            let statement = LoopStatement.record(unwritten)
            running = statement
            return actions + [.run(statement)]
        }
        // 2. Jobs that could not start go back.
        if !toRelease.isEmpty {
            let jobs = toRelease
            let statement = LoopStatement.release(jobs, delay: settings.deferral)
            running = statement
            return actions + [.run(statement)]
        }
        if stopDeadline != nil && inFlight.isEmpty {
            exited = true
            return actions + [.exit]
        }
        // 3. Heartbeat when due.
        if !inFlight.isEmpty && now >= nextHeartbeat {
            let jobs = inFlight.sorted { $0.id < $1.id }
            running = .heartbeat(jobs)
            return actions + [.run(.heartbeat(jobs))]
        }
        if inFlight.isEmpty {
            // Nothing to extend: the next heartbeat is one interval after work starts again.
            nextHeartbeat = max(nextHeartbeat, now + settings.heartbeatInterval)
        }
        // 4. Claim when there is room and a reason: a notification, the poll interval, a full
        //    previous batch (more may be waiting) with enough free slots, or outcomes written
        //    for destinations the previous claim found at their cap.
        let free = freeSlots
        if stopDeadline == nil && free > 0
            && (woken || now >= nextPoll || (lastClaimFull && free >= settings.refillThreshold) || roomFreed)
        {
            woken = false
            roomFreed = false
            let limit = min(free, settings.batchSize)
            running = .claim(limit: limit)
            return actions + [.run(.claim(limit: limit))]
        }
        // 5. Sleep until the next thing that can need us: the poll (only when a slot is free),
        //    the heartbeat (only with jobs in flight), the end of the grace period. Deliveries
        //    finishing, notifications and a stop arrive as events.
        var wake: Duration? = nil
        func consider(_ t: Duration) { wake = min(wake ?? t, t) }
        if stopDeadline == nil && free > 0 { consider(nextPoll) }
        if !inFlight.isEmpty { consider(nextHeartbeat) }
        if let deadline = stopDeadline, !inFlight.isEmpty { consider(deadline) }
        actions.append(.sleep(until: wake))
        return actions
    }
}
