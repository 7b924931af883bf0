import Foundation

/// A small blocking pool of `PostgresConnection`s for code that runs on many threads.
///
/// `withConnection` lends a connection to one caller at a time and blocks when all
/// `maximumConnections` are lent. A connection that broke while lent (a connection error was
/// thrown, or libpq marks it bad) is closed and replaced by a fresh one on the next checkout,
/// so a restarted server or a terminated backend heals without the caller doing anything
/// beyond retrying its own work.
public final class PostgresPool: @unchecked Sendable {
    private let conninfo: String
    private let applicationName: String
    private let settings: PostgresConnection.Settings
    private let lock = NSCondition()
    private var idle: [PostgresConnection] = []
    private var lent = 0
    private var closed = false
    /// The most connections open at once.
    public let maximumConnections: Int

    /// Creates a pool; connections are opened lazily.
    ///
    /// - Parameters:
    ///   - conninfo: libpq URI or conninfo string.
    ///   - maximumConnections: the most connections open at once (default 4).
    ///   - applicationName: reported in `pg_stat_activity` (default `courier`).
    ///   - settings: timeouts and keepalives of every connection (default: libpq's and the
    ///     server's).
    public init(
        conninfo: String, maximumConnections: Int = 4, applicationName: String = "courier",
        settings: PostgresConnection.Settings = .default
    ) {
        self.conninfo = conninfo
        self.maximumConnections = max(1, maximumConnections)
        self.applicationName = applicationName
        self.settings = settings
    }

    /// Lends a connection to `body` and takes it back afterwards.
    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try checkout()
        do {
            let value = try body(connection)
            checkin(connection, broken: !connection.isOpen)
            return value
        } catch {
            let broken = !connection.isOpen || (error as? PostgresError)?.isConnectionError == true
            checkin(connection, broken: broken)
            throw error
        }
    }

    /// Closes every idle connection; lent ones are closed when they come back.
    public func close() {
        lock.lock()
        closed = true
        let connections = idle
        idle.removeAll()
        lock.broadcast()
        lock.unlock()
        connections.forEach { $0.close() }
    }

    private func checkout() throws -> PostgresConnection {
        lock.lock()
        while !closed && idle.isEmpty && lent >= maximumConnections { lock.wait() }
        if closed {
            lock.unlock()
            throw PostgresError(kind: .usage, message: "the connection pool is closed")
        }
        lent += 1
        let reused = idle.popLast()
        lock.unlock()
        if let reused, reused.isOpen { return reused }
        do {
            return try PostgresConnection(conninfo, applicationName: applicationName, settings: settings)
        } catch {
            lock.lock()
            lent -= 1
            lock.signal()
            lock.unlock()
            throw error
        }
    }

    private func checkin(_ connection: PostgresConnection, broken: Bool) {
        if broken { connection.close() }
        lock.lock()
        lent -= 1
        if !broken && !closed { idle.append(connection) }
        let shouldClose = closed && !broken
        lock.signal()
        lock.unlock()
        if shouldClose { connection.close() }
    }
}
