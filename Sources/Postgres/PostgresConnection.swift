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

/// One PostgreSQL connection (a `PGconn`); every call is synchronous and blocks its thread.
///
/// Threading rule: a connection is used by one thread at a time. It is `Sendable` so it can be
/// handed to the thread that owns it (a worker loop, a pool checkout), not so that two threads
/// can share it. `PostgresPool` hands out connections exclusively.
///
/// Every statement binds its values as parameters (`PQexecParams` / `PQexecPrepared`); the only
/// way to run unparameterized text is `simpleQuery`, meant for fixed scripts such as migrations.
/// Sessions are set to `TimeZone = UTC` and `DateStyle = ISO` so timestamps decode exactly.
///
/// `Settings` adds keepalives, connect and statement timeouts, and a client-side deadline per
/// statement; with a deadline, statements use libpq's asynchronous calls and a peer that stops
/// answering costs at most the deadline, then a `.connectionLost` error.
public final class PostgresConnection: @unchecked Sendable {
    private var handle: OpaquePointer?
    private let conninfo: String
    private let applicationName: String
    /// The settings this connection was opened with (kept across `reconnect()`).
    public let settings: Settings
    private var preparedStatements: [String: String] = [:]
    private var listeningChannels: Set<String> = []

    /// Opens a connection from a libpq URI (`postgresql://...`) or conninfo string
    /// (`host=... dbname=...`); libpq's `PG*` environment variables fill in what is missing.
    ///
    /// - Parameters:
    ///   - conninfo: the connection string; its password never appears in errors. Its
    ///     parameters override `settings` (see `Settings`).
    ///   - applicationName: reported in `pg_stat_activity` unless the string sets one.
    ///   - settings: keepalives and timeouts (default `.default`: libpq's and the server's own).
    /// - Throws: `PostgresError` of kind `.connectionFailed` with libpq's reason.
    public init(_ conninfo: String, applicationName: String = "courier", settings: Settings = .default) throws {
        self.conninfo = conninfo
        self.applicationName = applicationName
        self.settings = settings
        handle = try Self.open(conninfo, applicationName: applicationName, settings: settings)
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    private static func open(_ conninfo: String, applicationName: String, settings: Settings) throws -> OpaquePointer {
        // libpq uses the last non-empty value of a repeated keyword, and the expanded URL takes
        // the place of `dbname`: the settings' defaults come first so the URL overrides them.
        var pairs = settings.libpqDefaults
        pairs.append(("dbname", conninfo))
        pairs.append(("fallback_application_name", applicationName))
        let session = settings.sessionOptions
        if !session.isEmpty {
            // Startup options are applied in order, so the URL's own `-c` (or PGOPTIONS) after
            // ours wins; this entry comes after `dbname` because it already contains them.
            let own = userOptions(conninfo) ?? ProcessInfo.processInfo.environment["PGOPTIONS"] ?? ""
            pairs.append(("options", own.isEmpty ? session : session + " " + own))
        }
        let conn: OpaquePointer? = withCStrings(pairs.map(\.0)) { keys in
            withCStrings(pairs.map(\.1)) { vals in PQconnectdbParams(keys, vals, 1) }
        }
        guard let conn else {
            throw PostgresError(kind: .connectionFailed, message: "could not allocate a libpq connection")
        }
        // Server notices (NOTICE, WARNING) are not errors; libpq would print them to stderr.
        PQsetNoticeProcessor(conn, { _, _ in }, nil)
        guard PQstatus(conn) == CONNECTION_OK else {
            let reason = PostgresError.connectionMessage(conn) ?? "unknown reason"
            PQfinish(conn)
            throw PostgresError(
                kind: .connectionFailed,
                message: "cannot connect to PostgreSQL: \(redactPassword(in: reason, conninfo: conninfo))")
        }
        let setup =
            "SET TimeZone TO 'UTC'; SET DateStyle TO 'ISO, YMD'; SET IntervalStyle TO 'postgres'; "
            + "SET client_min_messages TO warning"
        do {
            if let timeout = settings.queryTimeout {
                // Stays non-blocking: sending never waits on a full socket buffer, and `PQfinish`
                // after an expired deadline cannot hang on its goodbye message.
                PQsetnonblocking(conn, 1)
                _ = try exchange(conn, timeout: timeout) { PQsendQuery($0, setup) }
            } else {
                _ = try check(PQexec(conn, setup), conn)
            }
        } catch let expired as DeadlineExpired {
            PQfinish(conn)
            throw PostgresError(kind: .connectionFailed, message: expired.message)
        } catch {
            PQfinish(conn)
            throw error
        }
        return conn
    }

    /// The `options` the connection string sets itself, or nil when it sets none.
    private static func userOptions(_ conninfo: String) -> String? {
        var errorMessage: UnsafeMutablePointer<CChar>? = nil
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            // A bare database name, or a string libpq will reject with its own message.
            if let errorMessage { PQfreemem(errorMessage) }
            return nil
        }
        defer { PQconninfoFree(options) }
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if String(cString: keyword) == "options", let value = cursor.pointee.val {
                let text = String(cString: value)
                return text.isEmpty ? nil : text
            }
            cursor += 1
        }
        return nil
    }

    /// Closes the connection; later calls throw. Safe to call twice.
    public func close() {
        if let handle { PQfinish(handle) }
        handle = nil
        preparedStatements.removeAll()
    }

    /// True while libpq considers the connection healthy. A terminated backend is only noticed
    /// by the next statement, which then throws a connection error and makes this false.
    public var isOpen: Bool {
        guard let handle else { return false }
        return PQstatus(handle) == CONNECTION_OK
    }

    /// The value libpq uses for connection parameter `keyword` on this connection (`PQconninfo`),
    /// e.g. `keepalives_idle` or `connect_timeout`; nil when unset or empty, unknown, or `password`.
    public func connectionParameter(_ keyword: String) -> String? {
        guard let handle, keyword != "password", let options = PQconninfo(handle) else { return nil }
        defer { PQconninfoFree(options) }
        var cursor = options
        while let name = cursor.pointee.keyword {
            if String(cString: name) == keyword {
                return cursor.pointee.val.map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
            }
            cursor += 1
        }
        return nil
    }

    /// The server process id serving this connection (`pg_backend_pid()`).
    public var backendPID: Int32 {
        guard let handle else { return 0 }
        return PQbackendPID(handle)
    }

    /// Replaces the underlying connection with a fresh one to the same server, forgetting
    /// prepared statements and listening again on every channel that was listened to.
    ///
    /// - Throws: `.connectionFailed` when the server cannot be reached; the connection stays
    ///   closed and `reconnect` may be called again.
    public func reconnect() throws {
        close()
        handle = try Self.open(conninfo, applicationName: applicationName, settings: settings)
        for channel in listeningChannels.sorted() {
            try simpleQuery("LISTEN \(try quoteIdentifier(channel))")
        }
    }

    private func live() throws -> OpaquePointer {
        guard let handle else {
            throw PostgresError(kind: .connectionLost, message: "the connection is closed")
        }
        return handle
    }

    // MARK: Statements

    /// Runs one statement with bound parameters and returns its rows.
    ///
    /// - Parameters:
    ///   - sql: the statement, with `$1`, `$2`, ... placeholders.
    ///   - parameters: one value per placeholder; `nil` optionals bind SQL NULL.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> PostgresResult {
        try run(
            blocking: { conn in
                withParameters(parameters) { count, values, lengths, formats in
                    PQexecParams(conn, sql, count, nil, values, lengths, formats, 0)
                }
            },
            send: { conn in
                withParameters(parameters) { count, values, lengths, formats in
                    PQsendQueryParams(conn, sql, count, nil, values, lengths, formats, 0)
                }
            })
    }

    /// Prepares `sql` under `name` on this connection (`PQprepare`).
    public func prepare(name: String, sql: String) throws {
        _ = try run(blocking: { PQprepare($0, name, sql, 0, nil) }, send: { PQsendPrepare($0, name, sql, 0, nil) })
        preparedStatements[sql] = name
    }

    /// Runs a statement prepared with `prepare(name:sql:)`.
    @discardableResult
    public func queryPrepared(name: String, _ parameters: [any PostgresEncodable] = []) throws -> PostgresResult {
        try run(
            blocking: { conn in
                withParameters(parameters) { count, values, lengths, formats in
                    PQexecPrepared(conn, name, count, values, lengths, formats, 0)
                }
            },
            send: { conn in
                withParameters(parameters) { count, values, lengths, formats in
                    PQsendQueryPrepared(conn, name, count, values, lengths, formats, 0)
                }
            })
    }

    /// Runs `sql` as a prepared statement, preparing it on first use on this connection.
    ///
    /// Hot statements (claim, complete) use this so the server plans them once per connection.
    @discardableResult
    public func queryCached(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> PostgresResult {
        let name: String
        if let existing = preparedStatements[sql] {
            name = existing
        } else {
            name = "courier_s\(preparedStatements.count + 1)"
            try prepare(name: name, sql: sql)
        }
        return try queryPrepared(name: name, parameters)
    }

    /// Runs fixed SQL text that may hold several statements (`PQexec`); no parameters.
    ///
    /// For scripts written by the project (migrations), never for values. With several
    /// statements, the first error is thrown (PostgreSQL stops there).
    public func simpleQuery(_ sql: String) throws {
        _ = try run(blocking: { PQexec($0, sql) }, send: { PQsendQuery($0, sql) })
    }

    /// Runs `statements` in one round trip: sent together and answered together (libpq's
    /// pipeline mode), each as a statement prepared on this connection on first use, as
    /// `queryCached` does. Under a `queryTimeout`, the deadline covers the whole pipeline.
    ///
    /// PostgreSQL runs them in order and skips every one after a failure. That first error is
    /// thrown once all answers are read, so the connection is ready for the next statement.
    /// Inside a transaction block the failure leaves the transaction aborted, as it would one
    /// statement at a time: the caller rolls back.
    ///
    /// - Returns: each statement's result, in order.
    @discardableResult
    public func pipeline(_ statements: [PipelineStatement]) throws -> [PostgresResult] {
        let conn = try live()
        guard !statements.isEmpty else { return [] }
        var names: [String] = []
        names.reserveCapacity(statements.count)
        for statement in statements {
            if let name = preparedStatements[statement.sql] {
                names.append(name)
            } else {
                let name = "courier_s\(preparedStatements.count + 1)"
                try prepare(name: name, sql: statement.sql)
                names.append(name)
            }
        }
        do {
            return try Self.exchangePipeline(
                conn, names: names, statements: statements, timeout: settings.queryTimeout ?? .infinity)
        } catch let error as DeadlineExpired {
            close()
            throw PostgresError(kind: .connectionLost, message: error.message)
        } catch {
            // A connection left in pipeline mode (a failed send) would refuse every later
            // statement: drop it, as after a lost connection.
            if let handle, PQpipelineStatus(handle) != PQ_PIPELINE_OFF { close() }
            throw error
        }
    }

    /// Checks that the server answers within `timeout` seconds (`SELECT 1`), whatever the
    /// connection's `queryTimeout`.
    ///
    /// For a connection that otherwise only waits (a LISTEN connection in
    /// `waitForNotifications`): a frozen peer looks exactly like a quiet channel, so call this
    /// every few seconds. Notifications that arrive meanwhile are kept for the next wait.
    /// - Throws: `.connectionLost` when there is no answer in time (the connection is then
    ///   closed; `reconnect()` opens a new one) or the connection broke.
    public func ping(timeout: Double) throws {
        let conn = try live()
        _ = try runUnderDeadline(conn, timeout: timeout) { PQsendQuery($0, "SELECT 1") }
    }

    /// Runs `body` in a transaction: COMMIT when it returns, ROLLBACK when it throws.
    ///
    /// A COMMIT that gets no answer within the deadline throws a connection error: the caller
    /// cannot know whether it took effect, and must not treat it as a success.
    @discardableResult
    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try transaction(settings: nil, body)
    }

    /// Ends the open transaction block with COMMIT.
    public func commit() throws {
        try simpleQuery("COMMIT")
    }

    /// Rolls back the open transaction block after an error, when the connection is still
    /// there to do it; never throws (a ROLLBACK outside a block only warns).
    public func rollbackAfterError() {
        if isOpen { try? simpleQuery("ROLLBACK") }
    }

    /// Runs `body` in a transaction whose first statements are `settings` (`SET LOCAL ...`,
    /// semicolon-separated), sent together with BEGIN: one round trip instead of two.
    /// COMMIT when `body` returns, ROLLBACK when it throws or the settings fail.
    @discardableResult
    public func transaction<T>(settings: String?, _ body: (PostgresConnection) throws -> T) throws -> T {
        // A multi-statement string runs in one transaction block that BEGIN keeps open; a
        // failing setting aborts it, so roll back before throwing.
        do {
            try simpleQuery(settings.map { "BEGIN; " + $0 } ?? "BEGIN")
        } catch {
            if settings != nil { rollbackAfterError() }
            throw error
        }
        do {
            let value = try body(self)
            try commit()
            return value
        } catch {
            rollbackAfterError()
            throw error
        }
    }

    /// Streams rows into `COPY ... FROM STDIN` and returns the number of rows copied.
    ///
    /// - Parameters:
    ///   - sql: a `COPY table (columns) FROM STDIN` statement.
    ///   - chunks: the data in COPY's text (or the statement's) format, in pieces of any size.
    ///
    /// Runs blocking even with a `queryTimeout` (the deadline does not cover COPY).
    public func copyIn(_ sql: String, chunks: some Sequence<[UInt8]>) throws -> Int {
        let conn = try live()
        // `PQputCopyData` would return 0 ("try again") on a full buffer in non-blocking mode.
        let wasNonBlocking = PQisnonblocking(conn) == 1
        if wasNonBlocking { PQsetnonblocking(conn, 0) }
        defer { if wasNonBlocking { PQsetnonblocking(conn, 1) } }
        let start = PQexec(conn, sql)
        guard PQresultStatus(start) == PGRES_COPY_IN else {
            return try Self.check(start, conn).affectedRows
        }
        PQclear(start)
        var failure: String?
        for chunk in chunks where !chunk.isEmpty {
            let sent = chunk.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { PQputCopyData(conn, $0.baseAddress, Int32($0.count)) }
            }
            if sent != 1 {
                failure = PostgresError.connectionMessage(conn) ?? "COPY data could not be sent"
                break
            }
        }
        guard PQputCopyEnd(conn, failure) == 1 else {
            throw PostgresError(
                kind: .connectionLost, message: PostgresError.connectionMessage(conn) ?? "COPY could not be ended")
        }
        var copied = 0
        var firstError: (any Error)?
        while let result = PQgetResult(conn) {
            do { copied = try Self.check(result, conn).affectedRows } catch { firstError = firstError ?? error }
        }
        if let firstError { throw firstError }
        return copied
    }

    // MARK: Running statements

    /// Runs one statement: blocking without a `queryTimeout`, otherwise under the deadline.
    private func run(
        blocking: (OpaquePointer) -> OpaquePointer?, send: (OpaquePointer) -> Int32
    ) throws -> PostgresResult {
        let conn = try live()
        guard let timeout = settings.queryTimeout else { return try Self.check(blocking(conn), conn) }
        return try runUnderDeadline(conn, timeout: timeout, send: send)
    }

    /// Sends with `send` and collects the answer within `timeout` seconds; closes the
    /// connection when the deadline passes, since it is then in the middle of a statement.
    private func runUnderDeadline(
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
    private struct DeadlineExpired: Error {
        let message: String
    }

    /// The asynchronous exchange: send, flush, poll the socket with the remaining time, and
    /// read every result until libpq returns NULL (a multi-statement text gives several).
    ///
    /// - Returns: the last result, or throws the first error (and drains the rest, so the
    ///   connection is ready for the next statement).
    /// - Throws: `DeadlineExpired` when `timeout` passes first; `PostgresError` otherwise.
    private static func exchange(
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

    /// `pipeline`'s exchange: enter pipeline mode, queue every statement and a sync, flush,
    /// then read each statement's answer (results, then NULL) until the sync's.
    private static func exchangePipeline(
        _ conn: OpaquePointer, names: [String], statements: [PipelineStatement], timeout: Double
    ) throws -> [PostgresResult] {
        let wasBlocking = PQisnonblocking(conn) == 0
        if wasBlocking { PQsetnonblocking(conn, 1) }
        guard PQenterPipelineMode(conn) == 1 else { throw lost(conn, "the connection could not enter pipeline mode") }
        let deadline = Deadline(seconds: timeout)
        for (name, statement) in zip(names, statements) {
            let sent = withParameters(statement.parameters) { count, values, lengths, formats in
                PQsendQueryPrepared(conn, name, count, values, lengths, formats, 0)
            }
            guard sent == 1 else { throw lost(conn, "the statement could not be sent") }
        }
        guard PQpipelineSync(conn) == 1 else { throw lost(conn, "the statement could not be sent") }
        try flush(conn, deadline: deadline)
        var results = [PostgresResult?](repeating: nil, count: statements.count)
        var current = 0
        var firstError: PostgresError?
        reading: while true {
            try awaitResult(conn, deadline: deadline)
            guard let result = PQgetResult(conn) else {
                // The end of one statement's answer.
                if PQstatus(conn) == CONNECTION_BAD { break reading }
                current += 1
                continue
            }
            switch PQresultStatus(result) {
            case PGRES_PIPELINE_SYNC:
                PQclear(result)
                break reading
            case PGRES_PIPELINE_ABORTED:
                // Skipped after an earlier statement's error.
                PQclear(result)
            default:
                do {
                    let checked = try check(result, conn)
                    if current < results.count { results[current] = checked }
                } catch let error as PostgresError {
                    if firstError == nil { firstError = error }
                    if PQstatus(conn) == CONNECTION_BAD { break reading }
                }
            }
        }
        if PQstatus(conn) == CONNECTION_OK {
            PQexitPipelineMode(conn)
            if wasBlocking { PQsetnonblocking(conn, 0) }
        }
        if let firstError { throw firstError }
        let answered = results.compactMap { $0 }
        guard PQstatus(conn) == CONNECTION_OK, answered.count == statements.count else {
            throw lost(conn, "no result from server")
        }
        return answered
    }

    /// Writes out what libpq holds for the server. A non-blocking send may leave data in its
    /// buffer; PQflush returns 1 until all is written. The server may answer (or notify)
    /// meanwhile, so reading must go on as well.
    private static func flush(_ conn: OpaquePointer, deadline: Deadline) throws {
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
    private static func awaitResult(_ conn: OpaquePointer, deadline: Deadline) throws {
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
    private static func lost(_ conn: OpaquePointer, _ fallback: String) -> PostgresError {
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

    private static func check(_ result: OpaquePointer?, _ conn: OpaquePointer) throws -> PostgresResult {
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

    /// Waits until at least one notification arrives or `timeout` seconds pass.
    ///
    /// Blocks in `poll(2)` on the connection's socket (no busy loop). Returns the notifications
    /// already queued at once, or an empty array on timeout.
    /// - Throws: a connection error when the socket breaks while waiting.
    public func waitForNotifications(timeout: Double) throws -> [PostgresNotification] {
        let conn = try live()
        var received = drainNotifications(conn)
        if !received.isEmpty { return received }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, timeout) * 1e9)
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

    // MARK: Helpers

    /// The connection string with its password replaced by `***`, safe to print or log.
    public static func redacted(_ conninfo: String) -> String {
        redactPassword(in: conninfo, conninfo: conninfo)
    }

    static func redactPassword(in text: String, conninfo: String) -> String {
        var errorMessage: UnsafeMutablePointer<CChar>? = nil
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            if let errorMessage { PQfreemem(errorMessage) }
            return text
        }
        defer { PQconninfoFree(options) }
        var password: String?
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if String(cString: keyword) == "password", let value = cursor.pointee.val {
                password = String(cString: value)
            }
            cursor += 1
        }
        guard let password, !password.isEmpty else { return text }
        var redacted = text.replacingOccurrences(of: password, with: "***")
        if let encoded = password.addingPercentEncoding(withAllowedCharacters: .alphanumerics), encoded != password {
            redacted = redacted.replacingOccurrences(of: encoded, with: "***")
        }
        return redacted
    }
}

/// One statement of `PostgresConnection.pipeline(_:)`: its text and bound parameters.
public struct PipelineStatement: Sendable {
    /// The statement, with `$1`, `$2`, ... placeholders; one statement, not a script.
    public var sql: String
    /// One value per placeholder.
    public var parameters: [any PostgresEncodable]

    /// A statement and its parameters.
    public init(_ sql: String, _ parameters: [any PostgresEncodable] = []) {
        self.sql = sql
        self.parameters = parameters
    }

    /// `BEGIN`: the pipeline's later statements, and those after it, run in one transaction.
    public static let begin = PipelineStatement("BEGIN")
    /// `COMMIT`.
    public static let commit = PipelineStatement("COMMIT")
}

/// A point on the monotonic clock `seconds` from now, for the statement deadline.
private struct Deadline: CustomStringConvertible {
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

/// Calls `body` with a NULL-terminated array of C strings.
private func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> T) -> T {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) } + [nil]
    defer { copies.forEach { free($0) } }
    return copies.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { body($0.baseAddress!) }
    }
}

/// Lays parameters out as libpq wants them: values, lengths and formats (text 0, binary 1).
private func withParameters<T>(
    _ parameters: [any PostgresEncodable],
    _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> T
) -> T {
    if parameters.isEmpty { return body(0, nil, nil, nil) }
    var values: [UnsafePointer<CChar>?] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    var owned: [UnsafeMutableRawPointer] = []
    values.reserveCapacity(parameters.count)
    lengths.reserveCapacity(parameters.count)
    formats.reserveCapacity(parameters.count)
    defer { owned.forEach { $0.deallocate() } }
    for parameter in parameters {
        switch parameter.postgresValue {
        case .null:
            values.append(nil)
            lengths.append(0)
            formats.append(0)
        case .text(let text):
            var text = text
            let count = text.utf8.count
            let memory = UnsafeMutableRawPointer.allocate(byteCount: count + 1, alignment: 1)
            owned.append(memory)
            text.withUTF8 { utf8 in
                if let base = utf8.baseAddress { memory.copyMemory(from: base, byteCount: count) }
            }
            memory.storeBytes(of: 0, toByteOffset: count, as: UInt8.self)
            values.append(UnsafePointer(memory.assumingMemoryBound(to: CChar.self)))
            lengths.append(Int32(count))
            formats.append(0)
        case .bytes(let bytes):
            let memory = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
            owned.append(memory)
            bytes.withUnsafeBytes { raw in
                if let base = raw.baseAddress { memory.copyMemory(from: base, byteCount: bytes.count) }
            }
            values.append(UnsafePointer(memory.assumingMemoryBound(to: CChar.self)))
            lengths.append(Int32(bytes.count))
            formats.append(1)
        }
    }
    return values.withUnsafeBufferPointer { v in
        lengths.withUnsafeBufferPointer { l in
            formats.withUnsafeBufferPointer { f in
                body(Int32(parameters.count), v.baseAddress, l.baseAddress, f.baseAddress)
            }
        }
    }
}
extension PostgresConnection {
    /// How a connection protects itself against a slow or vanished server.
    ///
    /// Every field is optional; `nil` keeps what libpq and the server do by themselves, so
    /// `Settings()` behaves exactly like a plain libpq connection (the CLI's choice: a command
    /// that waits on a lock should wait). `Settings.worker` holds the worker's values.
    ///
    /// The database URL wins over every field: the libpq parameters are passed before the URL
    /// (`?keepalives_idle=7&connect_timeout=3` overrides them) and the session settings go into
    /// the startup `options` ahead of the URL's own (`?options=-c%20statement_timeout%3D5s`
    /// overrides them; without `options` in the URL, `PGOPTIONS` is kept the same way).
    /// Durations are in seconds; libpq's whole-second parameters are rounded up.
    public struct Settings: Sendable, Equatable {
        /// Seconds of silence before the kernel sends the first TCP keepalive probe (libpq
        /// `keepalives_idle`, with `keepalives=1`). Default `nil`: the kernel's (7,200 s on Linux).
        public var keepalivesIdle: Double?
        /// Seconds between unanswered keepalive probes (`keepalives_interval`). Default `nil`:
        /// the kernel's (75 s on Linux).
        public var keepalivesInterval: Double?
        /// Unanswered probes before the kernel declares the connection dead (`keepalives_count`).
        /// Default `nil`: the kernel's (9 on Linux).
        public var keepalivesCount: Int?
        /// Seconds that sent data may stay unacknowledged before the kernel drops the
        /// connection (`tcp_user_timeout`, Linux). Default `nil`: the kernel's (about 15 minutes
        /// of retransmissions).
        public var tcpUserTimeout: Double?
        /// Seconds allowed for opening a connection, per host address (`connect_timeout`;
        /// libpq treats values below 2 as 2). Default `nil`: wait as long as the kernel does.
        public var connectTimeout: Double?
        /// The session's `statement_timeout`: the server cancels a statement that runs longer
        /// (SQLSTATE 57014; the connection stays usable). Default `nil`: the server's setting.
        public var statementTimeout: Double?
        /// The session's `idle_in_transaction_session_timeout`: the server ends a session that
        /// sits inside a transaction for longer, releasing its locks. Default `nil`: the server's.
        public var idleInTransactionSessionTimeout: Double?
        /// The client-side deadline for each statement, in seconds. Default `nil`: statements
        /// block until the server answers (libpq's synchronous calls).
        ///
        /// Keepalives and `tcp_user_timeout` cannot notice a peer whose kernel still
        /// acknowledges packets but which never answers (a hung proxy, a frozen server). With a
        /// deadline, statements are sent asynchronously and the socket is polled for at most
        /// this long; on expiry the connection is closed and a `.connectionLost` error says so,
        /// so the caller reconnects. Set it above `statementTimeout`: a statement that is merely
        /// slow then fails cleanly on the server first, and the deadline only fires when the
        /// server cannot be heard at all (which is also why no cancel request is sent: it could
        /// not get through either). `copyIn` is not covered.
        public var queryTimeout: Double?

        /// Creates settings; every field defaults to `nil` (libpq's and the server's behaviour).
        public init(
            keepalivesIdle: Double? = nil,
            keepalivesInterval: Double? = nil,
            keepalivesCount: Int? = nil,
            tcpUserTimeout: Double? = nil,
            connectTimeout: Double? = nil,
            statementTimeout: Double? = nil,
            idleInTransactionSessionTimeout: Double? = nil,
            queryTimeout: Double? = nil
        ) {
            self.keepalivesIdle = keepalivesIdle
            self.keepalivesInterval = keepalivesInterval
            self.keepalivesCount = keepalivesCount
            self.tcpUserTimeout = tcpUserTimeout
            self.connectTimeout = connectTimeout
            self.statementTimeout = statementTimeout
            self.idleInTransactionSessionTimeout = idleInTransactionSessionTimeout
            self.queryTimeout = queryTimeout
        }

        /// Nothing set: libpq's and the server's defaults, statements block (the CLI).
        public static let `default` = Settings()

        /// The worker's connections: a dead or frozen peer is noticed within 20 s.
        ///
        /// keepalives 10 s idle, then every 5 s, 3 probes (an idle connection to a vanished
        /// host fails after 25 s); `tcp_user_timeout` 20 s (unacknowledged data);
        /// `connect_timeout` 10 s; `statement_timeout` 15 s; `idle_in_transaction_session_timeout`
        /// 60 s; client-side deadline 20 s (a frozen peer). A loop that reconnects at once has
        /// a fresh connection within 30 s of the freeze when the server is reachable again.
        public static let worker = Settings(
            keepalivesIdle: 10,
            keepalivesInterval: 5,
            keepalivesCount: 3,
            tcpUserTimeout: 20,
            connectTimeout: 10,
            statementTimeout: 15,
            idleInTransactionSessionTimeout: 60,
            queryTimeout: 20)

        /// libpq keyword/value pairs that go before the URL, so the URL can override them.
        var libpqDefaults: [(String, String)] {
            var pairs: [(String, String)] = []
            if keepalivesIdle != nil || keepalivesInterval != nil || keepalivesCount != nil {
                pairs.append(("keepalives", "1"))
            }
            if let keepalivesIdle { pairs.append(("keepalives_idle", Self.wholeSeconds(keepalivesIdle))) }
            if let keepalivesInterval { pairs.append(("keepalives_interval", Self.wholeSeconds(keepalivesInterval))) }
            if let keepalivesCount { pairs.append(("keepalives_count", String(max(1, keepalivesCount)))) }
            if let tcpUserTimeout { pairs.append(("tcp_user_timeout", Self.milliseconds(tcpUserTimeout))) }
            if let connectTimeout { pairs.append(("connect_timeout", Self.wholeSeconds(connectTimeout))) }
            return pairs
        }

        /// The `-c name=value` startup options for the session settings (empty when none is set).
        var sessionOptions: String {
            var options: [String] = []
            if let statementTimeout { options.append("-c statement_timeout=\(Self.milliseconds(statementTimeout))") }
            if let idleInTransactionSessionTimeout {
                options.append(
                    "-c idle_in_transaction_session_timeout=\(Self.milliseconds(idleInTransactionSessionTimeout))")
            }
            return options.joined(separator: " ")
        }

        /// At least 1: libpq reads 0 as "no limit" or "the kernel's default"; at most `Int32.max`.
        private static func wholeSeconds(_ seconds: Double) -> String { clamped(seconds) }

        /// At least 1 ms, for the same reason.
        private static func milliseconds(_ seconds: Double) -> String { clamped(seconds * 1000) }

        private static func clamped(_ units: Double) -> String {
            guard units.isFinite else { return units > 0 ? String(Int32.max) : "1" }
            return String(Int(min(max(units.rounded(.up), 1), Double(Int32.max))))
        }
    }
}
