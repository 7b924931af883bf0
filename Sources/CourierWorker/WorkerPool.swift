import CourierCore
import Foundation
import Logging
import Postgres

/// A worker process's pool: `loops` claim loops, a listener that wakes them on
/// `NOTIFY courier_jobs`, and a maintenance thread (rescue of expired leases, retention).
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
    private let metrics = WorkerMetrics()
    private let stopCondition = NSCondition()
    private var stopped = false
    private var helpers: [Thread] = []
    private var helpersRunning = 0

    /// Creates a pool; nothing runs until `start()`.
    public init(databaseURL: String, configuration: WorkerConfiguration, deliverer: any Deliverer, logger: Logger) {
        self.databaseURL = databaseURL
        self.configuration = configuration
        self.logger = logger
        let limiter = InFlightLimiter(perHostLimit: configuration.perHostLimit)
        let loopCount = min(configuration.loops, configuration.concurrency)
        let metrics = self.metrics
        loops = (0..<loopCount).map { index in
            // Split the slots evenly; the first loops take the remainder.
            let slots = configuration.concurrency / loopCount + (index < configuration.concurrency % loopCount ? 1 : 0)
            return ClaimLoop(
                index: index, databaseURL: databaseURL, configuration: configuration, slots: slots,
                deliverer: deliverer, limiter: limiter, logger: logger, metrics: metrics)
        }
    }

    /// Checks the database is reachable, then starts every thread.
    ///
    /// - Throws: the connection error when the database cannot be reached at start.
    public func start() throws {
        let probe = try PostgresConnection(databaseURL, applicationName: "courier-worker")
        probe.close()
        for (index, loop) in loops.enumerated() {
            spawn(name: "courier-claim-\(index)") { loop.run() }
        }
        spawn(name: "courier-listen") { [self] in listen() }
        spawn(name: "courier-maintain") { [self] in maintain() }
        logger.info(
            "worker started",
            metadata: [
                "worker.id": "\(configuration.workerID)", "worker.loops": "\(loops.count)",
                "worker.concurrency": "\(configuration.concurrency)",
                "worker.queues": "\(configuration.queues?.joined(separator: ",") ?? "*")",
            ])
    }

    private func spawn(name: String, _ body: @escaping @Sendable () -> Void) {
        stopCondition.withLock { helpersRunning += 1 }
        let thread = Thread { [self] in
            body()
            stopCondition.withLock {
                helpersRunning -= 1
                stopCondition.broadcast()
            }
        }
        thread.name = name
        thread.stackSize = 1 << 20
        helpers.append(thread)
        thread.start()
    }

    /// Jobs in flight across every loop.
    public var inFlight: Int { loops.reduce(0) { $0 + $1.inFlightCount } }

    /// Stops claiming, lets in-flight deliveries finish within the grace period, gives back the
    /// leases of anything unfinished, and returns when every loop has exited.
    public func shutdown() {
        stopCondition.withLock {
            stopped = true
            stopCondition.broadcast()
        }
        loops.forEach { $0.stop() }
        loops.forEach { $0.waitUntilDone() }
        stopCondition.withLock {
            while helpersRunning > 0 { stopCondition.wait() }
        }
        logger.info("worker stopped", metadata: ["worker.id": "\(configuration.workerID)"])
    }

    private var isStopped: Bool { stopCondition.withLock { stopped } }

    /// Sleeps up to `seconds`, returning early (true) when the pool stops.
    private func sleep(_ seconds: Double) -> Bool {
        stopCondition.withLock {
            if !stopped { _ = stopCondition.wait(until: Date().addingTimeInterval(seconds)) }
            return stopped
        }
    }

    private func wakeAll() { loops.forEach { $0.wake() } }

    /// LISTENs on `courier_jobs` and wakes the loops; on a lost connection, reconnects with
    /// backoff and wakes them anyway (notifications sent meanwhile are gone).
    private func listen() {
        var connection: PostgresConnection?
        var backoff = DatabaseBackoff()
        let wanted = configuration.queues.map(Set.init)
        while !isStopped {
            do {
                if connection == nil {
                    let fresh = try PostgresConnection(databaseURL, applicationName: "courier-listener")
                    try fresh.listen(WorkerStatements.wakeChannel)
                    connection = fresh
                    backoff.reset()
                    wakeAll()
                }
                let notes = try connection!.waitForNotifications(timeout: 0.5)
                if notes.contains(where: { wanted == nil || wanted!.contains($0.payload) }) { wakeAll() }
            } catch {
                connection?.close()
                connection = nil
                let delay = backoff.next()
                logger.warning("listener lost its connection; reconnecting", metadata: ["error": "\(error)"])
                if sleep(delay) { break }
            }
        }
        connection?.close()
    }

    /// Every `maintenanceInterval`: one maintenance pass if no other worker is running one.
    private func maintain() {
        var connection: PostgresConnection?
        while !sleep(configuration.maintenanceInterval) {
            do {
                if connection == nil {
                    connection = try PostgresConnection(databaseURL, applicationName: "courier-maintenance")
                }
                let store = JobStore(connection: connection!, workerID: configuration.workerID)
                guard let report = try store.maintain(retentionSeconds: configuration.retention) else { continue }
                let rescued = report.rescuedToRetrying + report.rescuedToDead
                if rescued > 0 {
                    metrics.rescued.increment(by: rescued)
                    logger.warning(
                        "rescued jobs whose lease expired",
                        metadata: ["jobs.retrying": "\(report.rescuedToRetrying)", "jobs.dead": "\(report.rescuedToDead)"])
                    wakeAll()
                }
                if report.deletedSucceeded > 0 {
                    logger.debug("retention deleted succeeded jobs", metadata: ["jobs.count": "\(report.deletedSucceeded)"])
                }
            } catch {
                connection?.close()
                connection = nil
                logger.warning("maintenance pass failed", metadata: ["error": "\(error)"])
            }
        }
        connection?.close()
    }
}
