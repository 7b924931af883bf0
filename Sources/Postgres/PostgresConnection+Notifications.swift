import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A notification received on a channel this connection listens to.
public struct PostgresNotification: Sendable, Equatable {
    /// The channel name.
    public var channel: String
    /// The payload (empty when none was sent).
    public var payload: String
    /// The process id of the notifying backend.
    public var senderPID: Int32
}

extension PostgresConnection {
    // MARK: LISTEN / NOTIFY

    /// Starts listening on `channel`; kept across `reconnect()`.
    public func listen(_ channel: String) throws {
        try simpleQuery("LISTEN \(try quoteIdentifier(channel))")
        listeningChannels.insert(channel)
    }

    /// Stops listening on `channel`.
    public func unlisten(_ channel: String) throws {
        try simpleQuery("UNLISTEN \(try quoteIdentifier(channel))")
        listeningChannels.remove(channel)
    }

    /// Sends a notification (`pg_notify`), delivered when the current transaction commits.
    public func notify(_ channel: String, payload: String = "") throws {
        try query("SELECT pg_notify($1, $2)", [channel, payload])
    }

    /// Waits until at least one notification arrives or `timeout` passes.
    ///
    /// Blocks in `poll(2)` on the connection's socket (no busy loop). Returns the notifications
    /// already queued at once, or an empty array on timeout.
    /// - Throws: a connection error when the socket breaks while waiting.
    public func waitForNotifications(timeout: Duration) throws -> [PostgresNotification] {
        let conn = try live()
        var received = drainNotifications(conn)
        if !received.isEmpty { return received }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, timeout.seconds) * 1e9)
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            if now >= deadline { return [] }
            let socket = PQsocket(conn)
            guard socket >= 0 else {
                throw PostgresError(kind: .connectionLost, message: "the connection has no socket")
            }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let waitMillis = Int32(min(UInt64(Int32.max), (deadline - now + 999_999) / 1_000_000))
            let ready = poll(&descriptor, 1, waitMillis)
            if ready < 0 {
                if errno == EINTR { continue }
                throw PostgresError(kind: .connectionLost, message: "poll failed: \(String(cString: strerror(errno)))")
            }
            if ready == 0 { continue }
            if PQconsumeInput(conn) == 0 || PQstatus(conn) == CONNECTION_BAD {
                throw PostgresError(
                    kind: .connectionLost,
                    message: PostgresError.connectionMessage(conn) ?? "connection lost while waiting for notifications")
            }
            received = drainNotifications(conn)
            if !received.isEmpty { return received }
        }
    }

    private func drainNotifications(_ conn: OpaquePointer) -> [PostgresNotification] {
        var out: [PostgresNotification] = []
        while let raw = PQnotifies(conn) {
            let note = raw.pointee
            out.append(
                PostgresNotification(
                    channel: String(cString: note.relname),
                    payload: note.extra.map { String(cString: $0) } ?? "",
                    senderPID: note.be_pid))
            PQfreemem(raw)
        }
        return out
    }

    /// Quotes an identifier (a channel name) for the few statements that cannot bind it.
    public func quoteIdentifier(_ identifier: String) throws -> String {
        let conn = try live()
        guard let escaped = PQescapeIdentifier(conn, identifier, identifier.utf8.count) else {
            throw PostgresError(kind: .usage, message: "invalid identifier \(identifier.debugDescription)")
        }
        defer { PQfreemem(escaped) }
        return String(cString: escaped)
    }
}
