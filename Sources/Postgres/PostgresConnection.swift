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

/// One PostgreSQL connection (a `PGconn`), blocking and synchronous.
///
/// Threading rule: a connection is used by one thread at a time. It is `Sendable` so it can be
/// handed to the thread that owns it (a worker loop, a pool checkout), not so that two threads
/// can share it. `PostgresPool` hands out connections exclusively.
///
/// Every statement binds its values as parameters (`PQexecParams` / `PQexecPrepared`); the only
/// way to run unparameterized text is `simpleQuery`, meant for fixed scripts such as migrations.
/// Sessions are set to `TimeZone = UTC` and `DateStyle = ISO` so timestamps decode exactly.
public final class PostgresConnection: @unchecked Sendable {
    private var handle: OpaquePointer?
    private let conninfo: String
    private let applicationName: String
    private var preparedStatements: [String: String] = [:]
    private var listeningChannels: Set<String> = []

    /// Opens a connection from a libpq URI (`postgresql://...`) or conninfo string
    /// (`host=... dbname=...`); libpq's `PG*` environment variables fill in what is missing.
    ///
    /// - Parameters:
    ///   - conninfo: the connection string; its password never appears in errors.
    ///   - applicationName: reported in `pg_stat_activity` unless the string sets one.
    /// - Throws: `PostgresError` of kind `.connectionFailed` with libpq's reason.
    public init(_ conninfo: String, applicationName: String = "courier") throws {
        self.conninfo = conninfo
        self.applicationName = applicationName
        handle = try Self.open(conninfo, applicationName: applicationName)
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    private static func open(_ conninfo: String, applicationName: String) throws -> OpaquePointer {
        let keywords = ["dbname", "fallback_application_name"]
        let values = [conninfo, applicationName]
        let conn: OpaquePointer? = withCStrings(keywords) { keys in
            withCStrings(values) { vals in PQconnectdbParams(keys, vals, 1) }
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
        let setup = PQexec(conn, "SET TimeZone TO 'UTC'; SET DateStyle TO 'ISO, YMD'; SET IntervalStyle TO 'postgres'; SET client_min_messages TO warning")
        defer { PQclear(setup) }
        guard PQresultStatus(setup) == PGRES_COMMAND_OK else {
            let error = PostgresError.from(result: setup, connection: conn)
            PQfinish(conn)
            throw error
        }
        return conn
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
        handle = try Self.open(conninfo, applicationName: applicationName)
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
        let conn = try live()
        let result = withParameters(parameters) { count, values, lengths, formats in
            PQexecParams(conn, sql, count, nil, values, lengths, formats, 0)
        }
        return try check(result, conn)
    }

    /// Prepares `sql` under `name` on this connection (`PQprepare`).
    public func prepare(name: String, sql: String) throws {
        let conn = try live()
        _ = try check(PQprepare(conn, name, sql, 0, nil), conn)
        preparedStatements[sql] = name
    }

    /// Runs a statement prepared with `prepare(name:sql:)`.
    @discardableResult
    public func queryPrepared(name: String, _ parameters: [any PostgresEncodable] = []) throws -> PostgresResult {
        let conn = try live()
        let result = withParameters(parameters) { count, values, lengths, formats in
            PQexecPrepared(conn, name, count, values, lengths, formats, 0)
        }
        return try check(result, conn)
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
    /// For scripts written by the project (migrations), never for values.
    public func simpleQuery(_ sql: String) throws {
        let conn = try live()
        _ = try check(PQexec(conn, sql), conn)
    }

    /// Runs `body` in a transaction: COMMIT when it returns, ROLLBACK when it throws.
    @discardableResult
    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try simpleQuery("BEGIN")
        do {
            let value = try body(self)
            try simpleQuery("COMMIT")
            return value
        } catch {
            if isOpen { try? simpleQuery("ROLLBACK") }
            throw error
        }
    }

    /// Streams rows into `COPY ... FROM STDIN` and returns the number of rows copied.
    ///
    /// - Parameters:
    ///   - sql: a `COPY table (columns) FROM STDIN` statement.
    ///   - chunks: the data in COPY's text (or the statement's) format, in pieces of any size.
    public func copyIn(_ sql: String, chunks: some Sequence<[UInt8]>) throws -> Int {
        let conn = try live()
        let start = PQexec(conn, sql)
        guard PQresultStatus(start) == PGRES_COPY_IN else {
            return try check(start, conn).affectedRows
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
            do { copied = try check(result, conn).affectedRows } catch { firstError = firstError ?? error }
        }
        if let firstError { throw firstError }
        return copied
    }

    private func check(_ result: OpaquePointer?, _ conn: OpaquePointer) throws -> PostgresResult {
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
            let error = PostgresError.from(result: result, connection: conn)
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
