import CourierCore
import Dispatch
import Foundation
import Postgres

/// The console's way to the database. libpq calls block, so they never run on a SwiftNIO event
/// loop or the Swift concurrency pool: each runs as a block on one of a few serial Dispatch
/// queues of this object's own (one per pooled connection, so at most that many threads ever
/// block in libpq), and the calling task waits for it without holding a thread.
final class WebDatabase: Sendable {
    private let pool: PostgresPool
    private let queues: [DispatchQueue]
    private let next = LockedCounter()

    /// A pool of `connections`; the server cancels any statement that runs longer than
    /// `statementTimeout`, so a page never waits on a lock or a runaway query for
    /// longer than that, and a dead or frozen database is noticed as the worker notices it.
    init(url: String, connections: Int, statementTimeout: Duration) {
        let count = max(1, connections)
        var settings = PostgresConnection.Settings.worker
        settings.statementTimeout = statementTimeout
        settings.queryTimeout = statementTimeout + .seconds(5)
        pool = PostgresPool(conninfo: url, maximumConnections: count, applicationName: "courier-web", settings: settings)
        queues = (0..<count).map { DispatchQueue(label: "courier.web.database.\($0)") }
    }

    /// Runs `body` with a connection, off the event loops, and returns its result.
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        let queue = queues[next.increment() % queues.count]
        return try await withCheckedThrowingContinuation { continuation in
            queue.async { [pool] in
                continuation.resume(with: Result { try pool.withConnection(body) })
            }
        }
    }

    /// Closes the connections.
    func close() { pool.close() }
}

/// A counter shared by threads.
final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0

    /// Adds one and returns the value before.
    func increment() -> Int {
        lock.withLock {
            defer { value &+= 1 }
            return value
        }
    }

    /// The current value.
    var current: Int { lock.withLock { value } }
}
