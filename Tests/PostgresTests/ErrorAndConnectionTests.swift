import CourierTesting
import Foundation
import Postgres
import XCTest

final class ErrorAndConnectionTests: XCTestCase {
    private var url: String!
    private var connection: PostgresConnection!

    override func setUpWithError() throws {
        url = try TestDatabase.serverURL()
        connection = try PostgresConnection(url)
    }

    override func tearDown() {
        connection?.close()
    }

    func testUniqueViolationCarriesSQLState23505() throws {
        try connection.simpleQuery("CREATE TEMP TABLE u (id int PRIMARY KEY)")
        try connection.query("INSERT INTO u VALUES ($1)", [1])
        XCTAssertThrowsError(try connection.query("INSERT INTO u VALUES ($1)", [1])) { error in
            let pgError = error as? PostgresError
            XCTAssertEqual(pgError?.sqlState, "23505")
            XCTAssertEqual(pgError?.kind, .server)
            XCTAssertNotNil(pgError?.detail)
            XCTAssertFalse(pgError?.isConnectionError ?? true)
        }
    }

    func testTransactionSettingsApplyToItsStatementsOnlyAndABadOneLeavesNoTransactionOpen() throws {
        let inside: String = try connection.transaction(settings: "SET LOCAL statement_timeout = '1234ms'") {
            try $0.query("SELECT current_setting('statement_timeout')")[0].decode(0)
        }
        XCTAssertEqual(inside, "1234ms")
        let after: String = try connection.query("SELECT current_setting('statement_timeout')")[0].decode(0)
        XCTAssertEqual(after, "0")

        var ran = false
        XCTAssertThrowsError(try connection.transaction(settings: "SET LOCAL no_such_setting_x = 1") { _ in ran = true }) {
            XCTAssertEqual(($0 as? PostgresError)?.sqlState, "42704")
        }
        XCTAssertFalse(ran)
        // Not left inside the aborted transaction block (where every statement fails with
        // 25P02): the next statements run, each in its own transaction.
        let first: Int64 = try connection.query("SELECT txid_current()")[0].decode(0)
        let second: Int64 = try connection.query("SELECT txid_current()")[0].decode(0)
        XCTAssertNotEqual(first, second)
    }

    func testAPipelineAnswersEachStatementInOrderOnBlockingAndDeadlineConnections() throws {
        let withDeadline = try PostgresConnection(url, settings: PostgresConnection.Settings(queryTimeout: .seconds(5)))
        defer { withDeadline.close() }
        for connection in [connection!, withDeadline] {
            let results = try connection.pipeline([
                PipelineStatement("BEGIN"),
                PipelineStatement("SELECT set_config('statement_timeout', '4321ms', true)"),
                PipelineStatement("SELECT n, $1::text FROM generate_series(1, $2::int) AS n", ["x", 3]),
                PipelineStatement("SELECT current_setting('statement_timeout')"),
                PipelineStatement("COMMIT"),
            ])
            XCTAssertEqual(results.count, 5)
            XCTAssertEqual(try results[2].rows.map { try $0.decode(0, as: Int.self) }, [1, 2, 3])
            XCTAssertEqual(try results[2][0].decode(1, as: String.self), "x")
            XCTAssertEqual(try results[3][0].decode(0, as: String.self), "4321ms")
            // Prepared once: the same statements again reuse them, and the connection is out of
            // pipeline mode (a plain statement runs).
            XCTAssertEqual(try connection.pipeline([PipelineStatement("SELECT $1::int + 1", [41])])[0][0].decode(0, as: Int.self), 42)
            XCTAssertEqual(try connection.query("SELECT current_setting('statement_timeout')")[0].decode(0, as: String.self), "0")
            XCTAssertEqual(try connection.pipeline([]).count, 0)
        }
    }

    func testAFailureInAPipelineIsThrownAndSkipsTheStatementsAfterIt() throws {
        try connection.simpleQuery("CREATE TEMP TABLE p (id int PRIMARY KEY)")
        XCTAssertThrowsError(
            try connection.pipeline([
                PipelineStatement("INSERT INTO p VALUES ($1)", [1]),
                PipelineStatement("INSERT INTO p VALUES ($1)", [1]),
                PipelineStatement("INSERT INTO p VALUES ($1)", [2]),
            ])
        ) { XCTAssertEqual(($0 as? PostgresError)?.sqlState, "23505") }
        // Outside a transaction block a pipeline is one implicit transaction: all or nothing.
        XCTAssertEqual(try connection.query("SELECT count(*) FROM p")[0].decode(0, as: Int.self), 0)

        // Inside one, the failure leaves it aborted (25P02) until the caller rolls back.
        XCTAssertThrowsError(
            try connection.pipeline([
                PipelineStatement("BEGIN"), PipelineStatement("INSERT INTO p VALUES ($1)", [3]),
                PipelineStatement("SELECT 1 / $1::int", [0]), PipelineStatement("COMMIT"),
            ])
        ) { XCTAssertEqual(($0 as? PostgresError)?.sqlState, "22012") }
        XCTAssertThrowsError(try connection.query("SELECT 1")) { XCTAssertEqual(($0 as? PostgresError)?.sqlState, "25P02") }
        try connection.simpleQuery("ROLLBACK")
        XCTAssertEqual(try connection.query("SELECT count(*) FROM p")[0].decode(0, as: Int.self), 0)
        XCTAssertTrue(connection.isOpen)
    }

    func testAPipelinePastItsDeadlineClosesTheConnection() throws {
        let short = try PostgresConnection(url, settings: PostgresConnection.Settings(queryTimeout: .milliseconds(500)))
        defer { short.close() }
        let started = Date()
        XCTAssertThrowsError(
            try short.pipeline([PipelineStatement("SELECT 1"), PipelineStatement("SELECT pg_sleep($1)", [5])])
        ) { XCTAssertEqual(($0 as? PostgresError)?.kind, .connectionLost, "\($0)") }
        XCTAssertLessThan(Date().timeIntervalSince(started), 4)
        XCTAssertFalse(short.isOpen)
        try short.reconnect()
        XCTAssertEqual(try short.pipeline([PipelineStatement("SELECT 7")])[0][0].decode(0, as: Int.self), 7)
    }

    func testRaisedExceptionCarriesP0001WithDetailAndHint() throws {
        let sql = "DO $$ BEGIN RAISE EXCEPTION 'boom' USING DETAIL = 'the detail', HINT = 'the hint'; END $$"
        XCTAssertThrowsError(try connection.simpleQuery(sql)) { error in
            let pgError = error as? PostgresError
            XCTAssertEqual(pgError?.sqlState, "P0001")
            XCTAssertEqual(pgError?.message, "boom")
            XCTAssertEqual(pgError?.detail, "the detail")
            XCTAssertEqual(pgError?.hint, "the hint")
        }
    }

    func testSyntaxErrorCarriesSQLState42601() throws {
        XCTAssertThrowsError(try connection.query("SELEC 1")) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "42601")
        }
        // The connection is still usable after a statement error.
        XCTAssertEqual(try connection.query("SELECT 1")[0].decode(0, as: Int.self), 1)
    }

    func testListenReceivesANotifyFromAnotherConnection() throws {
        try connection.listen("courier_test_channel")
        let sender = try PostgresConnection(url)
        defer { sender.close() }
        try sender.notify("courier_test_channel", payload: "hello")
        let received = try connection.waitForNotifications(timeout: .seconds(5))
        XCTAssertEqual(received.map(\.payload), ["hello"])
        XCTAssertEqual(received.first?.channel, "courier_test_channel")
        XCTAssertEqual(received.first?.senderPID, sender.backendPID)
    }

    func testWaitWithoutNotificationReturnsAfterItsTimeout() throws {
        try connection.listen("courier_quiet_channel")
        let start = Date()
        let received = try connection.waitForNotifications(timeout: .milliseconds(300))
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertTrue(received.isEmpty)
        XCTAssertGreaterThanOrEqual(elapsed, 0.29)
        XCTAssertLessThan(elapsed, 3)
    }

    func testTerminatedBackendIsDetectedAndReconnectRestoresListen() throws {
        try connection.listen("courier_reconnect_channel")
        let oldPID = connection.backendPID
        let admin = try PostgresConnection(url)
        defer { admin.close() }
        try admin.query("SELECT pg_terminate_backend($1)", [Int(oldPID)])
        XCTAssertThrowsError(try connection.query("SELECT 1")) { error in
            XCTAssertTrue((error as? PostgresError)?.isConnectionError == true, "\(error)")
        }
        XCTAssertFalse(connection.isOpen)
        try connection.reconnect()
        XCTAssertNotEqual(connection.backendPID, oldPID)
        XCTAssertEqual(try connection.query("SELECT 1")[0].decode(0, as: Int.self), 1)
        try admin.notify("courier_reconnect_channel", payload: "again")
        XCTAssertEqual(try connection.waitForNotifications(timeout: .seconds(5)).map(\.payload), ["again"])
    }

    func testPoolReplacesAConnectionWhoseBackendWasTerminated() throws {
        let pool = PostgresPool(conninfo: url, maximumConnections: 1)
        defer { pool.close() }
        let firstPID = try pool.withConnection { $0.backendPID }
        let admin = try PostgresConnection(url)
        defer { admin.close() }
        try admin.query("SELECT pg_terminate_backend($1)", [Int(firstPID)])
        XCTAssertThrowsError(try pool.withConnection { try $0.query("SELECT 1") }) { error in
            XCTAssertTrue((error as? PostgresError)?.isConnectionError == true, "\(error)")
        }
        let secondPID = try pool.withConnection { conn -> Int32 in
            XCTAssertEqual(try conn.query("SELECT 1")[0].decode(0, as: Int.self), 1)
            return conn.backendPID
        }
        XCTAssertNotEqual(firstPID, secondPID)
    }

    func testPoolLendsEachConnectionToOneThreadAtATime() throws {
        let pool = PostgresPool(conninfo: url, maximumConnections: 2)
        defer { pool.close() }
        let pids = LockedArray<Int32>()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let pid = try? pool.withConnection { conn -> Int32 in
                _ = try conn.query("SELECT pg_sleep(0.02)")
                return conn.backendPID
            }
            if let pid { pids.append(pid) }
        }
        XCTAssertEqual(pids.values.count, 8)
        XCTAssertLessThanOrEqual(Set(pids.values).count, 2)
    }
}

final class LockedArray<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [T] = []
    func append(_ value: T) { lock.withLock { storage.append(value) } }
    var values: [T] { lock.withLock { storage } }
}
