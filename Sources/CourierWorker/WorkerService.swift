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

    /// Creates a service around `pool`.
    public init(pool: WorkerPool, logger: Logger, notifier: SystemdNotifier = SystemdNotifier()) {
        self.pool = pool
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

        try pool.start()
        notifier.notify("READY=1\nSTATUS=claiming jobs")
        var watchdog: (any DispatchSourceTimer)?
        if let interval = notifier.watchdogInterval {
            // Ping at half the interval, as sd_watchdog_enabled(3) advises.
            let timer = DispatchSource.makeTimerSource(queue: .global())
            timer.schedule(deadline: .now(), repeating: interval / 2)
            timer.setEventHandler { [notifier] in notifier.notify("WATCHDOG=1") }
            timer.resume()
            watchdog = timer
        }
        stopSignal.wait()
        logger.info("stop requested; finishing in-flight deliveries")
        notifier.notify("STOPPING=1\nSTATUS=finishing in-flight deliveries")
        pool.shutdown()
        watchdog?.cancel()
    }

    /// Asks `run()` to shut down and return (what SIGTERM does).
    public func requestStop() {
        stopSignal.signal()
    }
}
