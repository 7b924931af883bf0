import CourierCore
import Foundation
import ServiceLifecycle

/// The last hour of attempts for every page that shows it (the overview, a queue's, a
/// host's): ONE read of `WebStatements.traffic` per console process covers every queue and
/// host, and is kept for `maxAge`. The read joins each of the hour's attempts to its job (the
/// attempts table has no queue or host), which costs what the hour's traffic costs; paying it
/// once every few seconds, not per page and per tab, keeps every page fast beside millions of
/// kept jobs. Requests that arrive while a read runs wait for that read rather than start
/// another; the console reads once as it starts, so the first page finds the hour ready.
final class TrafficFeed: Service, @unchecked Sendable {
    private let database: WebDatabase
    private let maxAge: Duration
    private let lock = NSLock()
    private var latest: (report: TrafficReport, at: ContinuousClock.Instant)?
    private var reading: Task<TrafficReport, any Error>?
    /// Database reads made so far (what the tests count).
    let reads = LockedCounter()

    init(database: WebDatabase, maxAge: Duration) {
        self.database = database
        self.maxAge = maxAge
    }

    /// The hour as of at most `maxAge` ago: the kept one, the read under way, or a new read.
    func report() async throws -> TrafficReport {
        let task: Task<TrafficReport, any Error> = lock.withLock {
            if let latest, ContinuousClock.now - latest.at < maxAge {
                let report = latest.report
                return Task { report }
            }
            if let reading { return reading }
            let task = Task { try await self.read() }
            reading = task
            return task
        }
        return try await task.value
    }

    private func read() async throws -> TrafficReport {
        do {
            let report = try await database.run { try WebStore(connection: $0).traffic() }
            _ = reads.increment()
            lock.withLock {
                latest = (report, .now)
                reading = nil
            }
            return report
        } catch {
            lock.withLock { reading = nil }
            throw error
        }
    }

    /// As a service: reads once at the start (a failure is left to the first page to show),
    /// then waits for the graceful shutdown.
    func run() async throws {
        _ = try? await report()
        try? await gracefulShutdown()
    }
}
