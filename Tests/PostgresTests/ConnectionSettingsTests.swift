import CourierTesting
import Foundation
import Postgres
import XCTest

/// Keepalives, timeouts and session settings: what `Settings` sets, what the URL overrides,
/// and that statements behave the same on the deadline (asynchronous) path.
final class ConnectionSettingsTests: XCTestCase {
    private var url: String!

    override func setUpWithError() throws {
        url = try TestDatabase.serverURL()
    }

    private func withQuery(_ query: String) -> String {
        url + (url.contains("?") ? "&" : "?") + query
    }

    private func show(_ connection: PostgresConnection, _ setting: String) throws -> String {
        // SHOW cannot take a parameter; current_setting can.
        try connection.query("SELECT current_setting($1)", [setting])[0].decode(0, as: String.self)
    }

    /// Checks the values libpq uses (`PQconninfo`) and the session's settings (`current_setting`).
    private func assertEffective(
        _ connection: PostgresConnection, libpq: KeyValuePairs<String, String?>,
        session: KeyValuePairs<String, String>, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        for (keyword, value) in libpq {
            XCTAssertEqual(connection.connectionParameter(keyword), value, keyword, file: file, line: line)
        }
        for (setting, value) in session {
            XCTAssertEqual(try show(connection, setting), value, setting, file: file, line: line)
        }
    }

    func testWorkerSettingsReachLibpqAndTheSession() throws {
        let connection = try PostgresConnection(url, settings: .worker)
        defer { connection.close() }
        // The session setup still runs too (timestamps decode in UTC, ISO).
        try assertEffective(
            connection,
            libpq: [
                "keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5", "keepalives_count": "3",
                "tcp_user_timeout": "20000", "connect_timeout": "10",
            ],
            session: ["statement_timeout": "15s", "idle_in_transaction_session_timeout": "1min", "TimeZone": "UTC"])
        XCTAssertEqual(PostgresConnection.Settings.worker.queryTimeout, .seconds(20))
    }

    func testDefaultSettingsLeaveLibpqAndTheServerAlone() throws {
        let connection = try PostgresConnection(url)
        defer { connection.close() }
        XCTAssertEqual(connection.settings, .default)
        try assertEffective(
            connection,
            libpq: ["keepalives_idle": nil, "tcp_user_timeout": nil, "connect_timeout": nil, "options": nil],
            session: ["statement_timeout": "0", "idle_in_transaction_session_timeout": "0"])
    }

    func testURLOverridesEverySetting() throws {
        let overriding = withQuery(
            "keepalives_idle=7&keepalives_interval=2&keepalives_count=9&tcp_user_timeout=4000&connect_timeout=3"
                + "&options=-c%20statement_timeout%3D5s%20-c%20idle_in_transaction_session_timeout%3D6s")
        let connection = try PostgresConnection(overriding, settings: .worker)
        defer { connection.close() }
        try assertEffective(
            connection,
            libpq: [
                "keepalives_idle": "7", "keepalives_interval": "2", "keepalives_count": "9",
                "tcp_user_timeout": "4000", "connect_timeout": "3",
            ],
            session: ["statement_timeout": "5s", "idle_in_transaction_session_timeout": "6s"])
    }

    func testURLOverridesOneSettingAndKeepsTheOthers() throws {
        let connection = try PostgresConnection(
            withQuery("keepalives_idle=7&connect_timeout=3&options=-c%20search_path%3Dpg_catalog"), settings: .worker)
        defer { connection.close() }
        // The URL's own options are kept, and ours still apply where it says nothing.
        try assertEffective(
            connection,
            libpq: [
                "keepalives_idle": "7", "connect_timeout": "3", "keepalives_interval": "5",
                "tcp_user_timeout": "20000",
            ],
            session: [
                "search_path": "pg_catalog", "statement_timeout": "15s", "idle_in_transaction_session_timeout": "1min",
            ])
    }

    func testKeyValueConninfoOverridesToo() throws {
        guard let components = URLComponents(string: url), let host = components.host else {
            return XCTFail("expected a URL in COURIER_TEST_DATABASE_URL: \(url!)")
        }
        var conninfo = "host=\(host) port=\(components.port ?? 5432) dbname=postgres"
        if let user = components.user { conninfo += " user=\(user)" }
        conninfo += " keepalives_count=4 options='-c statement_timeout=2500'"
        let connection = try PostgresConnection(conninfo, settings: .worker)
        defer { connection.close() }
        try assertEffective(
            connection, libpq: ["keepalives_count": "4", "keepalives_idle": "10"],
            session: ["statement_timeout": "2500ms", "idle_in_transaction_session_timeout": "1min"])
    }

    func testGenericPlansSetThePlanCacheModeUnlessTheURLSaysOtherwise() throws {
        var settings = PostgresConnection.Settings.worker
        settings.genericPlans = true
        let generic = try PostgresConnection(url, settings: settings)
        defer { generic.close() }
        XCTAssertEqual(try show(generic, "plan_cache_mode"), "force_generic_plan")
        XCTAssertEqual(try show(generic, "statement_timeout"), "15s", "the other session settings stay")
        try generic.reconnect()
        XCTAssertEqual(try show(generic, "plan_cache_mode"), "force_generic_plan", "kept across a reconnect")

        let plain = try PostgresConnection(url, settings: .worker)
        defer { plain.close() }
        XCTAssertEqual(try show(plain, "plan_cache_mode"), "auto")

        let overridden = try PostgresConnection(
            withQuery("options=-c%20plan_cache_mode%3Dforce_custom_plan"), settings: settings)
        defer { overridden.close() }
        XCTAssertEqual(try show(overridden, "plan_cache_mode"), "force_custom_plan")
    }

    func testReconnectKeepsTheSettings() throws {
        let connection = try PostgresConnection(url, settings: .worker)
        defer { connection.close() }
        try connection.reconnect()
        try assertEffective(connection, libpq: ["keepalives_idle": "10"], session: ["statement_timeout": "15s"])
    }

    func testOutOfRangeValuesAreClampedNotPassedThrough() throws {
        let settings = PostgresConnection.Settings(
            keepalivesIdle: .seconds(-5), keepalivesInterval: .milliseconds(200), keepalivesCount: 0,
            tcpUserTimeout: .seconds(Int64.max), connectTimeout: .zero, statementTimeout: .microseconds(100),
            idleInTransactionSessionTimeout: .seconds(1_000_000_000_000), queryTimeout: .seconds(5))
        let connection = try PostgresConnection(url, settings: settings)
        defer { connection.close() }
        // libpq reads 0 as "the kernel's default" or "no limit", so nothing rounds down to it.
        try assertEffective(
            connection,
            libpq: [
                "keepalives_idle": "1", "keepalives_interval": "1", "keepalives_count": "1",
                "tcp_user_timeout": "2147483647", "connect_timeout": "1",
            ],
            session: ["statement_timeout": "1ms", "idle_in_transaction_session_timeout": "2147483647ms"])
    }

    func testThePasswordIsNeverReturnedAsAParameter() throws {
        let connection = try PostgresConnection(url, settings: .worker)
        defer { connection.close() }
        XCTAssertNil(connection.connectionParameter("password"))
        XCTAssertNil(connection.connectionParameter("no_such_keyword"))
    }

    func testServerStatementTimeoutFailsTheStatementBeforeTheDeadline() throws {
        let connection = try PostgresConnection(
            url, settings: PostgresConnection.Settings(statementTimeout: .milliseconds(200), queryTimeout: .seconds(10)))
        defer { connection.close() }
        XCTAssertThrowsError(try connection.query("SELECT pg_sleep(5)")) { error in
            let pgError = error as? PostgresError
            XCTAssertEqual(pgError?.sqlState, "57014", "\(error)")
            XCTAssertFalse(pgError?.isConnectionError ?? true)
        }
        // A cancelled statement leaves the connection usable.
        XCTAssertTrue(connection.isOpen)
        XCTAssertEqual(try connection.query("SELECT 1")[0].decode(0, as: Int.self), 1)
    }

    func testIdleInTransactionTimeoutEndsTheSessionAsAConnectionError() throws {
        let connection = try PostgresConnection(
            url, settings: PostgresConnection.Settings(idleInTransactionSessionTimeout: .milliseconds(200), queryTimeout: .seconds(5)))
        defer { connection.close() }
        try connection.simpleQuery("BEGIN")
        Thread.sleep(forTimeInterval: 1)
        XCTAssertThrowsError(try connection.query("SELECT 1")) { error in
            XCTAssertTrue((error as? PostgresError)?.isConnectionError == true, "\(error)")
        }
        try connection.reconnect()
        XCTAssertEqual(try connection.query("SELECT 1")[0].decode(0, as: Int.self), 1)
    }

    func testSetLocalInsideATransactionWorksUnderTheDeadline() throws {
        // The worker's claim: several SET LOCAL in one simple query, then the claim itself.
        let connection = try PostgresConnection(url, settings: .worker)
        defer { connection.close() }
        let inside = try connection.transaction { conn -> String in
            try conn.simpleQuery("SET LOCAL synchronous_commit = off; SET LOCAL enable_sort = off")
            return try conn.query("SELECT current_setting('enable_sort') || current_setting('synchronous_commit')")[0]
                .decode(0, as: String.self)
        }
        XCTAssertEqual(inside, "offoff")
        XCTAssertEqual(try show(connection, "enable_sort"), "on")
    }

    func testSeveralStatementsReportTheirErrorAndKeepTheConnection() throws {
        let connection = try PostgresConnection(url, settings: .worker)
        defer { connection.close() }
        try connection.simpleQuery("CREATE TEMP TABLE several (n int); INSERT INTO several VALUES (1); SELECT 1")
        XCTAssertThrowsError(
            try connection.simpleQuery("INSERT INTO several VALUES (2); SELEC 3; INSERT INTO several VALUES (4)")
        ) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "42601", "\(error)")
        }
        // The script ran as one implicit transaction and stopped at the error.
        XCTAssertEqual(try connection.query("SELECT count(*) FROM several")[0].decode(0, as: Int.self), 1)
        // The server parses the whole text first, then stops at the first failing statement.
        XCTAssertThrowsError(try connection.simpleQuery("SELECT 1; SELECT 1/0; SELECT 2")) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "22012", "\(error)")
        }
        XCTAssertTrue(connection.isOpen)
    }

    func testTheDeadlinePathReturnsWhatTheBlockingPathReturns() throws {
        let blocking = try PostgresConnection(url)
        let deadline = try PostgresConnection(url, settings: .worker)
        defer {
            blocking.close()
            deadline.close()
        }
        let bytes: [UInt8] = [0, 1, 0, 255, 0, 10, 13, 0]
        let text = "Grüße, 世界 🚀 \u{200B}é"
        for connection in [blocking, deadline] {
            let row = try connection.queryCached(
                "SELECT $1::text, $2::bytea, $3::bigint, $4::text IS NULL, $5::timestamptz",
                [text, bytes, Int64.min, String?.none, Date(timeIntervalSince1970: 1_700_000_000.25)])[0]
            XCTAssertEqual(try row.decode(0, as: String.self), text)
            XCTAssertEqual(try row.decode(1, as: [UInt8].self), bytes)
            XCTAssertEqual(try row.decode(2, as: Int64.self), Int64.min)
            XCTAssertEqual(try row.decode(3, as: Bool.self), true)
            XCTAssertEqual(try row.decode(4, as: Date.self), Date(timeIntervalSince1970: 1_700_000_000.25))
            XCTAssertEqual(try connection.query("SELECT 1 WHERE false").rowCount, 0)
            XCTAssertThrowsError(try connection.query("SELECT $1::int", ["nope"])) { error in
                XCTAssertEqual((error as? PostgresError)?.sqlState, "22P02", "\(error)")
            }
            try connection.simpleQuery("CREATE TEMP TABLE IF NOT EXISTS affected (n int)")
            XCTAssertEqual(try connection.query("INSERT INTO affected SELECT generate_series(1, 3)").affectedRows, 3)
            XCTAssertNoThrow(try connection.simpleQuery(""))
        }
    }
}
