import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a `WorkerPool` as a service: starts it, tells systemd it is ready, pings the watchdog,
/// and on SIGTERM or SIGINT stops gracefully (in-flight deliveries finish within the grace
/// period, the rest are given back) and returns.
public final class WorkerService: @unchecked Sendable {
    private let pool: WorkerPool
    private let logger: Logger
    private let notifier: SystemdNotifier
    private let stopSignal = DispatchSemaphore(value: 0)
    private let statusInterval: Duration
    private let summaryInterval: Duration

    /// Creates a service around `pool`.
    /// - Parameters:
    ///   - statusInterval: time between `STATUS=` updates (default 5 s).
    ///   - summaryInterval: time between info-level summary log lines (default 60 s).
    public init(
        pool: WorkerPool, logger: Logger, notifier: SystemdNotifier = SystemdNotifier(), statusInterval: Duration = .seconds(5),
        summaryInterval: Duration = .seconds(60)
    ) {
        self.pool = pool
        self.statusInterval = statusInterval
        self.summaryInterval = summaryInterval
        self.logger = logger
        self.notifier = notifier
    }

    /// Starts the pool and blocks until SIGTERM/SIGINT (or `requestStop()`), then shuts down.
    public func run() throws {
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGTERM, SIGINT] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { [weak self] in self?.requestStop() }
            source.resume()
            sources.append(source)
        }
        defer { sources.forEach { $0.cancel() } }

        // start() checks the schema and opens every loop's connection: READY=1 means ready.
        try pool.start()
        notifier.notify("READY=1\nSTATUS=claiming jobs")
        let heartbeat = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "courier.service"))
        let watchdog = notifier.watchdogInterval
        // Stamp the loops a few times per watchdog interval; ping systemd only while every loop
        // answered within half the interval, so a loop stuck in a statement gets the process
        // restarted. STATUS= is refreshed on the same beat.
        let period = min(watchdog.map { $0 / 4 } ?? statusInterval, statusInterval)
        var lastStatus = DispatchTime.now()
        var lastWritten = pool.outcomesWritten
        var lastSummary = DispatchTime.now()
        var summarized = pool.outcomes
        let beat = DispatchTimeInterval(min(period, summaryInterval))
        heartbeat.schedule(deadline: .now() + beat, repeating: beat)
        heartbeat.setEventHandler { [pool, notifier, logger, statusInterval, summaryInterval] in
            pool.pingLoops()
            if let watchdog {
                if pool.loopsResponsive(within: watchdog / 2) {
                    notifier.notify("WATCHDOG=1")
                } else {
                    logger.error("a claim loop has not answered for half the watchdog interval; not pinging the watchdog")
                }
            }
            let now = DispatchTime.now()
            let elapsed = Duration.nanoseconds(now.uptimeNanoseconds - lastStatus.uptimeNanoseconds)
            if elapsed >= statusInterval * 0.99 {
                let written = pool.outcomesWritten
                let rate = Double(written - lastWritten) / max(elapsed.inSeconds, 0.001)
                notifier.notify(
                    "STATUS=\(pool.inFlight) in flight, \(String(format: "%.1f", rate)) deliveries/s")
                lastStatus = now
                lastWritten = written
            }
            // One info line a minute: what an on-call person reads first in the journal.
            let sinceSummary = Duration.nanoseconds(now.uptimeNanoseconds - lastSummary.uptimeNanoseconds)
            if sinceSummary >= summaryInterval * 0.99 {
                let outcomes = pool.outcomes
                let delta = outcomes.since(summarized)
                logger.info(
                    "summary",
                    metadata: [
                        "seconds": "\(Int(sinceSummary.inSeconds.rounded()))", "delivered": "\(delta.succeeded)",
                        "retried": "\(delta.retried)", "dead": "\(delta.dead)", "postponed": "\(delta.postponed)",
                        "parked": "\(delta.parked)", "in_flight": "\(pool.inFlight)",
                    ])
                summarized = outcomes
                lastSummary = now
            }
        }
        heartbeat.resume()
        stopSignal.wait()
        logger.info("stop requested; finishing in-flight deliveries")
        notifier.notify("STOPPING=1\nSTATUS=finishing in-flight deliveries")
        pool.shutdown()
        heartbeat.cancel()
    }

    /// Asks `run()` to shut down and return (what SIGTERM does).
    public func requestStop() {
        stopSignal.signal()
    }
}
