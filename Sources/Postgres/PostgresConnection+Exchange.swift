import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension PostgresConnection {
    // MARK: Running statements

    /// Runs one statement: blocking without a `queryTimeout`, otherwise under the deadline.
    func run(
        blocking: (OpaquePointer) -> OpaquePointer?, send: (OpaquePointer) -> Int32
    ) throws -> PostgresResult {
        let conn = try live()
        guard let timeout = settings.queryTimeout?.seconds else { return try Self.check(blocking(conn), conn) }
        return try runUnderDeadline(conn, timeout: timeout, send: send)
    }

    /// Sends with `send` and collects the answer within `timeout` seconds; closes the
    /// connection when the deadline passes, since it is then in the middle of a statement.
    func runUnderDeadline(
        _ conn: OpaquePointer, timeout: Double, send: (OpaquePointer) -> Int32
    ) throws -> PostgresResult {
        do {
            return try Self.exchange(conn, timeout: timeout, send: send)
        } catch let error as DeadlineExpired {
            close()
            throw PostgresError(kind: .connectionLost, message: error.message)
        }
    }

    /// The deadline passed with the statement unanswered; the connection must be dropped.
    struct DeadlineExpired: Error {
        let message: String
    }

    /// The asynchronous exchange: send, flush, poll the socket with the remaining time, and
    /// read every result until libpq returns NULL (a multi-statement text gives several).
    ///
    /// - Returns: the last result, or throws the first error (and drains the rest, so the
    ///   connection is ready for the next statement).
    /// - Throws: `DeadlineExpired` when `timeout` passes first; `PostgresError` otherwise.
    static func exchange(
        _ conn: OpaquePointer, timeout: Double, send: (OpaquePointer) -> Int32
    ) throws -> PostgresResult {
        // A blocking connection (no `queryTimeout`, as for `ping`) is switched for the exchange
        // and back afterwards, except after an expired deadline: it is closed next, and
        // `PQfinish` must not block.
        guard PQisnonblocking(conn) == 0 else { return try exchangeNonBlocking(conn, timeout: timeout, send: send) }
        PQsetnonblocking(conn, 1)
        do {
            let result = try exchangeNonBlocking(conn, timeout: timeout, send: send)
            PQsetnonblocking(conn, 0)
            return result
        } catch let error as PostgresError {
            if PQstatus(conn) == CONNECTION_OK { PQsetnonblocking(conn, 0) }
            throw error
        }
    }

    private static func exchangeNonBlocking(
        _ conn: OpaquePointer, timeout: Double, send: (OpaquePointer) -> Int32
    ) throws -> PostgresResult {
        let deadline = Deadline(seconds: timeout)
        guard send(conn) == 1 else { throw lost(conn, "the statement could not be sent") }
        try flush(conn, deadline: deadline)
        var kept: PostgresResult?
        var firstError: PostgresError?
        while true {
            try awaitResult(conn, deadline: deadline)
            guard let result = PQgetResult(conn) else { break }
            let status = PQresultStatus(result)
            if status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH {
                // libpq would hand out this result again and again; the caller drives COPY.
                return PostgresResult(handle: result)
            }
            do {
                kept = try check(result, conn)
            } catch let error as PostgresError {
                if firstError == nil { firstError = error }
                if PQstatus(conn) == CONNECTION_BAD { break }
            }
        }
        if let firstError { throw firstError }
        if let kept { return kept }
        throw lost(conn, "no result from server")
    }

    /// Writes out what libpq holds for the server. A non-blocking send may leave data in its
    /// buffer; PQflush returns 1 until all is written. The server may answer (or notify)
    /// meanwhile, so reading must go on as well.
    static func flush(_ conn: OpaquePointer, deadline: Deadline) throws {
        while true {
            let flushed = PQflush(conn)
            if flushed == 0 { return }
            if flushed < 0 { throw lost(conn, "the statement could not be sent") }
            let events = try waitForSocket(conn, events: Int16(POLLIN | POLLOUT), deadline: deadline)
            if events & Int16(POLLIN | POLLHUP | POLLERR) != 0, PQconsumeInput(conn) == 0 {
                throw lost(conn, "connection lost while sending")
            }
        }
    }

    /// Reads from the socket until `PQgetResult` would not block.
    static func awaitResult(_ conn: OpaquePointer, deadline: Deadline) throws {
        while PQisBusy(conn) == 1 {
            _ = try waitForSocket(conn, events: Int16(POLLIN), deadline: deadline)
            if PQconsumeInput(conn) == 0 {
                guard PQstatus(conn) == CONNECTION_BAD else { throw lost(conn, "the answer could not be read") }
                // The socket is gone but what was read stays: PQgetResult returns the server's
                // last words (a FATAL error such as 57P01 or 25P03) without waiting.
                return
            }
        }
    }

    /// A connection error carrying libpq's own message when it has one.
    static func lost(_ conn: OpaquePointer, _ fallback: String) -> PostgresError {
        PostgresError(kind: .connectionLost, message: PostgresError.connectionMessage(conn) ?? fallback)
    }

    /// Waits in `poll(2)` until the socket is ready for `events`, retrying after signals.
    ///
    /// - Returns: the events that occurred.
    /// - Throws: `DeadlineExpired` when the deadline passes first.
    private static func waitForSocket(_ conn: OpaquePointer, events: Int16, deadline: Deadline) throws -> Int16 {
        while true {
            let socket = PQsocket(conn)
            guard socket >= 0 else { throw lost(conn, "the connection has no socket") }
            guard let waitMillis = deadline.remainingMilliseconds() else {
                throw DeadlineExpired(
                    message: "no answer from PostgreSQL within \(deadline.description) s; connection closed")
            }
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let ready = poll(&descriptor, 1, waitMillis)
            if ready < 0 {
                if errno == EINTR { continue }
                throw PostgresError(kind: .connectionLost, message: "poll failed: \(String(cString: strerror(errno)))")
            }
            if ready > 0 { return descriptor.revents }
        }
    }

    static func check(_ result: OpaquePointer?, _ conn: OpaquePointer) throws -> PostgresResult {
        guard let result else {
            let lost = PQstatus(conn) == CONNECTION_BAD
            throw PostgresError(
                kind: lost ? .connectionLost : .server,
                message: PostgresError.connectionMessage(conn) ?? "no result from server")
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_COPY_IN, PGRES_COPY_OUT:
            return PostgresResult(handle: result)
        default:
            var error = PostgresError.from(result: result, connection: conn)
            // FATAL (idle-in-transaction timeout 25P03, admin shutdown 57P01, ...) means the server
            // ends the session; libpq may not have read the close yet, but the connection is gone.
            if let severity = PQresultErrorField(result, Int32(UInt8(ascii: "V"))),
                ["FATAL", "PANIC"].contains(String(cString: severity))
            {
                error.kind = .connectionLost
            }
            PQclear(result)
            throw error
        }
    }
}

/// A point on the monotonic clock `seconds` from now, for the statement deadline.
struct Deadline: CustomStringConvertible {
    let seconds: Double
    let endNanos: UInt64

    init(seconds: Double) {
        self.seconds = seconds
        let nanos = seconds.isNaN || seconds <= 0 ? 0 : min(seconds, 1e9) * 1e9
        endNanos = DispatchTime.now().uptimeNanoseconds &+ UInt64(nanos)
    }

    /// Milliseconds left for `poll` (rounded up, so a wait never ends just short of the
    /// deadline), or nil once it has passed.
    func remainingMilliseconds() -> Int32? {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now < endNanos else { return nil }
        return Int32(min(UInt64(Int32.max), (endNanos - now + 999_999) / 1_000_000))
    }

    /// The timeout as people write it: `20`, `1.5`.
    var description: String {
        seconds == seconds.rounded() && abs(seconds) < 1e15 ? String(Int(seconds)) : String(seconds)
    }
}
