import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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
    private(set) var handle: OpaquePointer?
    private let conninfo: String
    private let applicationName: String
    /// The settings this connection was opened with (kept across `reconnect()`).
    public let settings: Settings
    var preparedStatements: [String: String] = [:]
    var listeningChannels: Set<String> = []

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
            if let timeout = settings.queryTimeout?.seconds {
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

    func live() throws -> OpaquePointer {
        guard let handle else {
            throw PostgresError(kind: .connectionLost, message: "the connection is closed")
        }
        return handle
    }

    /// Checks that the server answers within `timeout` seconds (`SELECT 1`), whatever the
    /// connection's `queryTimeout`.
    ///
    /// For a connection that otherwise only waits (a LISTEN connection in
    /// `waitForNotifications`): a frozen peer looks exactly like a quiet channel, so call this
    /// every few seconds. Notifications that arrive meanwhile are kept for the next wait.
    /// - Throws: `.connectionLost` when there is no answer in time (the connection is then
    ///   closed; `reconnect()` opens a new one) or the connection broke.
    public func ping(timeout: Duration) throws {
        let conn = try live()
        _ = try runUnderDeadline(conn, timeout: timeout.seconds) { PQsendQuery($0, "SELECT 1") }
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
    /// libpq's whole-second parameters are rounded up; the session's are sent in milliseconds.
    public struct Settings: Sendable, Equatable {
        /// Silence before the kernel sends the first TCP keepalive probe (libpq
        /// `keepalives_idle`, with `keepalives=1`). Default `nil`: the kernel's (7,200 s on Linux).
        public var keepalivesIdle: Duration?
        /// Time between unanswered keepalive probes (`keepalives_interval`). Default `nil`:
        /// the kernel's (75 s on Linux).
        public var keepalivesInterval: Duration?
        /// Unanswered probes before the kernel declares the connection dead (`keepalives_count`).
        /// Default `nil`: the kernel's (9 on Linux).
        public var keepalivesCount: Int?
        /// How long sent data may stay unacknowledged before the kernel drops the
        /// connection (`tcp_user_timeout`, Linux). Default `nil`: the kernel's (about 15 minutes
        /// of retransmissions).
        public var tcpUserTimeout: Duration?
        /// Time allowed for opening a connection, per host address (`connect_timeout`;
        /// libpq treats values below 2 as 2). Default `nil`: wait as long as the kernel does.
        public var connectTimeout: Duration?
        /// The session's `statement_timeout`: the server cancels a statement that runs longer
        /// (SQLSTATE 57014; the connection stays usable). Default `nil`: the server's setting.
        public var statementTimeout: Duration?
        /// The session's `idle_in_transaction_session_timeout`: the server ends a session that
        /// sits inside a transaction for longer, releasing its locks. Default `nil`: the server's.
        public var idleInTransactionSessionTimeout: Duration?
        /// The client-side deadline for each statement. Default `nil`: statements
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
        public var queryTimeout: Duration?
        /// The session's `plan_cache_mode = force_generic_plan`: each prepared statement is
        /// planned once for any parameters instead of, as the server chooses by default, again
        /// at every execution when its first five custom plans looked cheaper than a generic
        /// one. For a connection whose statements take lists of ids, where a custom plan has
        /// nothing to gain. Default `false`: the server's setting.
        public var genericPlans = false

        /// Creates settings; every field defaults to `nil` (libpq's and the server's behaviour).
        public init(
            keepalivesIdle: Duration? = nil,
            keepalivesInterval: Duration? = nil,
            keepalivesCount: Int? = nil,
            tcpUserTimeout: Duration? = nil,
            connectTimeout: Duration? = nil,
            statementTimeout: Duration? = nil,
            idleInTransactionSessionTimeout: Duration? = nil,
            queryTimeout: Duration? = nil,
            genericPlans: Bool = false
        ) {
            self.keepalivesIdle = keepalivesIdle
            self.keepalivesInterval = keepalivesInterval
            self.keepalivesCount = keepalivesCount
            self.tcpUserTimeout = tcpUserTimeout
            self.connectTimeout = connectTimeout
            self.statementTimeout = statementTimeout
            self.idleInTransactionSessionTimeout = idleInTransactionSessionTimeout
            self.queryTimeout = queryTimeout
            self.genericPlans = genericPlans
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
            keepalivesIdle: .seconds(10),
            keepalivesInterval: .seconds(5),
            keepalivesCount: 3,
            tcpUserTimeout: .seconds(20),
            connectTimeout: .seconds(10),
            statementTimeout: .seconds(15),
            idleInTransactionSessionTimeout: .seconds(60),
            queryTimeout: .seconds(20))

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
            if genericPlans { options.append("-c plan_cache_mode=force_generic_plan") }
            return options.joined(separator: " ")
        }

        /// At least 1: libpq reads 0 as "no limit" or "the kernel's default"; at most `Int32.max`.
        private static func wholeSeconds(_ duration: Duration) -> String { clamped(duration.seconds) }

        /// At least 1 ms, for the same reason.
        private static func milliseconds(_ duration: Duration) -> String { clamped(duration.seconds * 1000) }

        private static func clamped(_ units: Double) -> String {
            guard units.isFinite else { return units > 0 ? String(Int32.max) : "1" }
            return String(Int(min(max(units.rounded(.up), 1), Double(Int32.max))))
        }
    }
}

extension Duration {
    /// The duration in seconds, for libpq's parameters and the socket waits.
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
