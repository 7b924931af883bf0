import CourierCore
import CourierSecrets
import Dispatch
import Foundation
import Logging
import Postgres

/// A worker process's pool of Dispatch loops: `loops` claim loops, a listener that wakes them
/// on `NOTIFY courier_jobs`, and a maintenance loop (rescue of expired leases, retention,
/// queue depth). Each runs on its own serial `DispatchQueue` with its own connection, because
/// libpq calls block and must never run on the Swift concurrency pool. `docs/architecture.md`
/// describes the threading model.
///
/// ```swift
/// let pool = WorkerPool(databaseURL: url, configuration: .init(), deliverer: deliverer, logger: logger)
/// try pool.start()
/// // ... on SIGTERM:
/// pool.shutdown()   // stops claiming, lets in-flight work finish within the grace period
/// ```
public final class WorkerPool: @unchecked Sendable {
    private let databaseURL: String
    private let configuration: WorkerConfiguration
    private let logger: Logger
    private let loops: [ClaimLoop]
    private let bodies: PendingBodies
    private let metrics: WorkerMetrics
    private let connect: @Sendable (String) throws -> PostgresConnection
    private let secretsKey: SecretsKey?
    private let deliverer: any Deliverer

    private let listenerQueue = DispatchQueue(label: "courier.listener")
    private let maintenanceQueue = DispatchQueue(label: "courier.maintenance")
    private let maintenance = MaintenanceState()
    private let helpersDone = DispatchGroup()

    private let lock = NSLock()
    private var stopped = false
    private var started = false

    /// Creates a pool; nothing runs until `start()`.
    ///
    /// - Parameter secretsKey: the key the deliverer opens webhook endpoints' secrets with;
    ///   `start()` checks it against the database (``SecretsKeyStartError``).
    public init(
        databaseURL: String, configuration: WorkerConfiguration, deliverer: any Deliverer, secretsKey: SecretsKey? = nil,
        logger: Logger
    ) {
        self.databaseURL = databaseURL
        self.secretsKey = secretsKey
        self.deliverer = deliverer
        self.configuration = configuration
        self.logger = logger
        let metrics = WorkerMetrics()
        self.metrics = metrics
        let settings = configuration.connection
        let open: @Sendable (String, PostgresConnection.Settings) throws -> PostgresConnection = { name, settings in
            try PostgresConnection(databaseURL, applicationName: name, settings: settings)
        }
        let connect: @Sendable (String) throws -> PostgresConnection = { name in try open(name, settings) }
        self.connect = connect
        let loopSettings = Self.loopSettings(settings)
        let limiter = InFlightLimiter()
        let bodies = PendingBodies(
            budgetBytes: configuration.bodyBudget, workerID: configuration.workerID, metrics: metrics,
            connect: { try connect("courier-worker-bodies") })
        self.bodies = bodies
        let loopCount = min(configuration.loops, configuration.concurrency)
        loops = (0..<loopCount).map { index in
            // Split the slots evenly; the first loops take the remainder.
            let slots = configuration.concurrency / loopCount + (index < configuration.concurrency % loopCount ? 1 : 0)
            return ClaimLoop(
                index: index,
                connect: { try open("courier-worker", loopSettings) },
                configuration: configuration, slots: slots,
                deliverer: deliverer, limiter: limiter, bodies: bodies, logger: logger, metrics: metrics)
        }
    }

    /// Checks that the database is reachable and its schema is the one this binary expects,
    /// opens every loop's connection, then starts the loops.
    ///
    /// - Throws: `WorkerStartError` when the schema is missing, older or newer;
    ///   ``SecretsKeyStartError`` when endpoints have secrets and the worker has no key, or a
    ///   key that does not open them; the connection error when the database cannot be reached.
    public func start() throws {
        try configuration.validate()
        let probe = try connect("courier-worker")
        defer { probe.close() }
        let status = try Migrator().status(probe)
        guard status.isCurrent else { throw WorkerStartError(status: status) }
        try SecretsKeyStartError.check(secretsKey, on: probe)
        for loop in loops { try loop.connectNow() }
        lock.withLock { started = true }
        loops.forEach { $0.start() }
        startListener()
        startMaintenance()
        logger.info(
            "worker started",
            metadata: [
                "worker.id": "\(configuration.workerID)", "worker.loops": "\(loops.count)",
                "worker.concurrency": "\(configuration.concurrency)",
                "worker.queues": "\(configuration.queues?.joined(separator: ",") ?? "*")",
            ])
    }

    /// Deliveries started and not yet written, across every loop.
    public var inFlight: Int { loops.reduce(0) { $0 + $1.inFlightCount } }

    /// Outcomes written since start (succeeded, retried or dead).
    public var outcomesWritten: Int { metrics.outcomesWritten }

    /// Outcomes written since start, by kind.
    public var outcomes: OutcomeTally { metrics.outcomes }

    /// Queues a liveness stamp on every loop; `loopsResponsive(within:)` reads the stamps.
    public func pingLoops() { loops.forEach { $0.ping() } }

    /// True when every claim loop ran something within `window`: none is stuck in a statement.
    public func loopsResponsive(within window: Duration) -> Bool {
        loops.allSatisfy { $0.isResponsive(within: window) }
    }

    /// Stops claiming, lets in-flight deliveries finish within the grace period, writes their
    /// outcomes, and returns when every loop has exited. With the database down, returns at the
    /// latest `shutdownGiveUp` seconds after the grace period, leaving leases to the rescuer.
    public func shutdown() {
        let wasStarted = lock.withLock { () -> Bool in
            defer { stopped = true }
            return started && !stopped
        }
        guard wasStarted else { return }
        loops.forEach { $0.stop() }
        loops.forEach { $0.waitUntilDone() }
        maintenanceQueue.sync { finishMaintenance() }
        helpersDone.wait()
        bodies.close()
        logger.info("worker stopped", metadata: ["worker.id": "\(configuration.workerID)"])
    }

    private var isStopped: Bool { lock.withLock { stopped } }

    private func wakeAll() { loops.forEach { $0.wake() } }

    // MARK: Listener

    /// LISTENs on `courier_jobs` and wakes the loops. Each round waits half a second for
    /// notifications, so a stop is noticed quickly; every `listenerPing` seconds a ping proves
    /// the connection still answers (a silent peer would otherwise hold it forever). On a
    /// lost connection it reconnects with backoff and wakes the loops anyway (notifications
    /// sent meanwhile are gone).
    private func startListener() {
        helpersDone.enter()
        let state = ListenerState()
        listenerQueue.async { [self] in listenRound(state) }
    }

    private final class ListenerState: @unchecked Sendable {
        var connection: PostgresConnection?
        var failures = 0
        var lastPing = DispatchTime.now()
    }

    private func listenRound(_ state: ListenerState) {
        if isStopped {
            state.connection?.close()
            helpersDone.leave()
            return
        }
        var delay: Duration = .zero
        do {
            if state.connection == nil {
                let fresh = try connect("courier-listener")
                try fresh.listen(WorkerStatements.wakeChannel)
                state.connection = fresh
                state.failures = 0
                state.lastPing = .now()
                wakeAll()
            }
            let wanted = configuration.queues.map(Set.init)
            let notes = try state.connection!.waitForNotifications(timeout: .milliseconds(500))
            if notes.contains(where: { wanted == nil || wanted!.contains($0.payload) }) { wakeAll() }
            if DispatchTime.now() >= state.lastPing + DispatchTimeInterval(configuration.listenerPing) {
                try state.connection!.ping(timeout: .seconds(5))
                state.lastPing = .now()
            }
        } catch {
            state.connection?.close()
            state.connection = nil
            state.failures += 1
            delay = ClaimLoopMachine.retryDelay(failures: state.failures, jitter: Double.random(in: 0.75...1.25))
            logger.warning("listener lost its connection; reconnecting", metadata: ["error": "\(ClaimLoop.loggable(error))"])
        }
        listenerQueue.asyncAfter(deadline: .now() + DispatchTimeInterval(delay)) { [self] in listenRound(state) }
    }

    // MARK: Maintenance

    /// Every `maintenanceInterval`: one maintenance pass if no other worker is running one,
    /// and this process's reading of queue depth for the metrics. A pass that stopped on its
    /// deletion budget with old jobs left is followed by the next one after
    /// `retentionBudget.pauseWhenBehind`, so retention keeps up with any traffic the database
    /// can delete; the depth reading stays at the regular interval.
    private func startMaintenance() {
        helpersDone.enter()
        scheduleMaintenance(after: configuration.maintenanceInterval)
    }

    /// The maintenance loop's state; touched only on `maintenanceQueue`.
    private final class MaintenanceState: @unchecked Sendable {
        var connection: PostgresConnection?
        var next: DispatchWorkItem?
        var finished = false
        /// When the gauges were last read; nil until the first reading. (Not a DispatchTime of
        /// uptime 0: Dispatch takes a raw value of 0 as "now", so a reading never came due.)
        var lastDepth: DispatchTime?
    }

    private func scheduleMaintenance(after delay: Duration) {
        let item = DispatchWorkItem { [self] in maintenanceRound() }
        maintenance.next = item
        maintenanceQueue.asyncAfter(deadline: .now() + DispatchTimeInterval(delay), execute: item)
    }

    /// Ends the loop once, whether the stop came between rounds (the waiting round is
    /// cancelled, so a stop never waits for a maintenance interval) or during one.
    private func finishMaintenance() {
        guard !maintenance.finished else { return }
        maintenance.finished = true
        maintenance.next?.cancel()
        maintenance.connection?.close()
        maintenance.connection = nil
        helpersDone.leave()
    }

    private func maintenanceRound() {
        if isStopped || maintenance.finished {
            finishMaintenance()
            return
        }
        var delay = configuration.maintenanceInterval
        // The deliverer's connections need no database: read even when the pass below fails.
        if let connections = deliverer.connections { metrics.recordConnections(connections) }
        do {
            if maintenance.connection == nil { maintenance.connection = try connect("courier-maintenance") }
            let connection = maintenance.connection!
            let report = try maintainOnce(connection)
            delay = configuration.retentionBudget.nextPass(after: report, interval: configuration.maintenanceInterval)
            let depthDue = maintenance.lastDepth.map { .now() >= $0 + DispatchTimeInterval(configuration.maintenanceInterval * 0.9) } ?? true
            if depthDue {
                let store = JobStore(connection: connection, workerID: configuration.workerID)
                metrics.recordDepth(try store.queueDepth(queues: configuration.queues))
                metrics.recordDestinations(try store.destinationHealth())
                maintenance.lastDepth = .now()
            }
        } catch {
            maintenance.connection?.close()
            maintenance.connection = nil
            logger.warning("maintenance pass failed", metadata: ["error": "\(ClaimLoop.loggable(error))"])
        }
        scheduleMaintenance(after: delay)
    }

    private func maintainOnce(_ connection: PostgresConnection) throws -> MaintenanceReport? {
        let store = JobStore(connection: connection, workerID: configuration.workerID)
        let retention = RetentionDefaults(
            succeeded: configuration.retention, cancelled: configuration.retentionCancelled,
            dead: configuration.retentionDead)
        let report = try store.maintain(
            retention: retention, lease: configuration.leaseDuration,
            budget: configuration.retentionBudget)
        guard let report else { return nil }
        let rescued = report.rescuedToRetrying + report.rescuedToDead
        if rescued > 0 {
            metrics.rescued.increment(by: rescued)
            logger.warning(
                "rescued jobs whose lease expired",
                metadata: ["jobs.retrying": "\(report.rescuedToRetrying)", "jobs.dead": "\(report.rescuedToDead)"])
            wakeAll()
        }
        if report.deleted > 0 {
            metrics.retentionDeleted.increment(by: report.deleted)
            logger.debug(
                "retention deleted finished jobs",
                metadata: [
                    "jobs.succeeded": "\(report.deletedSucceeded)", "jobs.cancelled": "\(report.deletedCancelled)",
                    "jobs.dead": "\(report.deletedDead)", "retention.caught_up": "\(report.caughtUp)",
                    "retention.batches": "\(report.deleteBatches)",
                    "retention.seconds": "\(String(format: "%.3f", report.deletionTime.inSeconds))",
                ])
        }
        return report
    }
}

/// Why a worker refused to start.
public struct WorkerStartError: Error, CustomStringConvertible, Sendable {
    /// What the schema check found.
    public let status: SchemaStatus
    public var description: String { status.message }
}

extension WorkerPool {
    /// The settings of the claim loops' connections: the worker's, with generic plans. Every
    /// statement a loop runs (the claim, the outcome batch, heartbeats, releases) takes lists
    /// of jobs and is planned once per connection; the server's default planned the outcome
    /// batch again at every execution (about 3,700 instructions per delivered job, 1 % of the
    /// backend's).
    static func loopSettings(_ settings: PostgresConnection.Settings) -> PostgresConnection.Settings {
        var settings = settings
        settings.genericPlans = true
        return settings
    }
}

/// Why a worker with webhook endpoints refused to start: it could not sign their deliveries.
public struct SecretsKeyStartError: Error, CustomStringConvertible, Sendable {
    /// One line naming the setting to fix.
    public let description: String

    /// Checks that `key` opens the newest endpoint secret in the database; with no key, that
    /// there is no endpoint secret at all.
    static func check(_ key: SecretsKey?, on connection: PostgresConnection) throws {
        guard let (endpointID, sealed) = try WebhookStore(connection: connection).anySealedSecret() else { return }
        guard let key else {
            throw SecretsKeyStartError(description:
                "webhook endpoints have secrets but no secrets key is set: set COURIER_SECRETS_KEY_FILE "
                    + "(or --secrets-key-file) to the key file they were sealed with")
        }
        do {
            _ = try key.open(sealed, endpointID: endpointID)
        } catch {
            throw SecretsKeyStartError(description:
                "the secrets key (COURIER_SECRETS_KEY_FILE or --secrets-key-file) does not open endpoint "
                    + "\(endpointID)'s secret: it is not the key the secrets were sealed with")
        }
    }
}

extension DispatchTimeInterval {
    /// `duration` in whole nanoseconds, for Dispatch's timers (saturating past about 292 years).
    init(_ duration: Duration) {
        self = .nanoseconds(Int(clamping: max(0, duration.inNanoseconds)))
    }
}
