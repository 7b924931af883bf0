import CourierTesting
import Foundation
import Postgres
import XCTest

/// A peer that keeps the TCP connection open but stops answering: a `TCPProxy` between the
/// connection and PostgreSQL is frozen, so the kernel keeps acknowledging and only the
/// client-side deadline can notice.
final class DeadPeerTests: XCTestCase {
    private var serverURL: String!
    private var proxy: TCPProxy!
    private var proxiedURL: String!

    /// The worker's settings with short deadlines, so each freeze costs a second or two.
    private func settings(queryTimeout: Duration) -> PostgresConnection.Settings {
        var settings = PostgresConnection.Settings.worker
        settings.queryTimeout = queryTimeout
        settings.connectTimeout = .seconds(2)
        return settings
    }

    override func setUpWithError() throws {
        serverURL = try TestDatabase.serverURL()
        proxy = try TCPProxy(databaseURL: serverURL)
        proxiedURL = try proxy.url(for: serverURL)
    }

    override func tearDown() {
        proxy?.stop()
    }

    func testStatementOnAFrozenConnectionThrowsAConnectionErrorWithinTheDeadline() throws {
        let connection = try PostgresConnection(proxiedURL, settings: settings(queryTimeout: .milliseconds(1500)))
        defer { connection.close() }
        XCTAssertEqual(try connection.query("SELECT $1::int", [7])[0].decode(0, as: Int.self), 7)
        proxy.freeze()
        let start = Date()
        XCTAssertThrowsError(try connection.query("SELECT $1::int", [8])) { error in
            let pgError = error as? PostgresError
            XCTAssertEqual(pgError?.kind, .connectionLost, "\(error)")
            XCTAssertTrue(pgError?.isConnectionError == true)
            XCTAssertEqual(pgError?.message, "no answer from PostgreSQL within 1.5 s; connection closed")
        }
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertGreaterThanOrEqual(elapsed, 1.4)
        XCTAssertLessThan(elapsed, 2.5)
        XCTAssertFalse(connection.isOpen)
        // Closed, not half-used: the next statement fails at once instead of waiting again.
        XCTAssertThrowsError(try connection.query("SELECT 1")) { error in
            XCTAssertTrue((error as? PostgresError)?.isConnectionError == true, "\(error)")
        }
    }

    func testEveryKindOfStatementIsUnderTheDeadline() throws {
        let statements: [(String, (PostgresConnection) throws -> Void)] = [
            ("query", { try $0.query("SELECT $1::text", ["x"]) }),
            ("queryCached (prepares first)", { try $0.queryCached("SELECT $1::int + 1", [1]) }),
            ("prepare", { try $0.prepare(name: "frozen_prepare", sql: "SELECT $1::int") }),
            ("queryPrepared", { try $0.queryPrepared(name: "ready", [1]) }),
            ("simpleQuery", { try $0.simpleQuery("SELECT 1; SELECT 2") }),
            ("transaction", { _ = try $0.transaction { try $0.query("SELECT 1") } }),
            ("ping", { try $0.ping(timeout: .milliseconds(500)) }),
            ("notify", { try $0.notify("courier_frozen", payload: "p") }),
        ]
        for (name, statement) in statements {
            let connection = try PostgresConnection(proxiedURL, settings: settings(queryTimeout: .milliseconds(500)))
            defer { connection.close() }
            try connection.prepare(name: "ready", sql: "SELECT $1::int")
            proxy.freeze()
            let start = Date()
            XCTAssertThrowsError(try statement(connection), name) { error in
                XCTAssertTrue((error as? PostgresError)?.isConnectionError == true, "\(name): \(error)")
            }
            XCTAssertLessThan(Date().timeIntervalSince(start), 1.5, name)
            XCTAssertFalse(connection.isOpen, name)
            proxy.thaw()
        }
    }

    func testReconnectAfterThawGivesAWorkingConnection() throws {
        let connection = try PostgresConnection(proxiedURL, settings: settings(queryTimeout: .seconds(1)))
        defer { connection.close() }
        let firstPID = connection.backendPID
        proxy.freeze()
        XCTAssertThrowsError(try connection.query("SELECT 1"))
        proxy.thaw()
        try connection.reconnect()
        XCTAssertNotEqual(connection.backendPID, firstPID)
        XCTAssertEqual(try connection.queryCached("SELECT $1::int", [3])[0].decode(0, as: Int.self), 3)
        XCTAssertEqual(proxy.acceptedConnections, 2)
    }

    func testReconnectThroughAFrozenProxyFailsWithinConnectTimeoutThenSucceedsAfterThaw() throws {
        let connection = try PostgresConnection(proxiedURL, settings: settings(queryTimeout: .seconds(1)))
        defer { connection.close() }
        proxy.freeze()
        XCTAssertThrowsError(try connection.query("SELECT 1"))
        // The kernel still completes the handshake (listen backlog), so only connect_timeout ends it.
        let start = Date()
        XCTAssertThrowsError(try connection.reconnect()) { error in
            XCTAssertEqual((error as? PostgresError)?.kind, .connectionFailed, "\(error)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 4.5)
        proxy.thaw()
        try connection.reconnect()
        XCTAssertEqual(try connection.query("SELECT 1")[0].decode(0, as: Int.self), 1)
    }

    func testAStoppedProxyClosesItsConnectionsAndABlockingStatementSeesIt() throws {
        let connection = try PostgresConnection(proxiedURL)
        defer { connection.close() }
        XCTAssertEqual(try connection.query("SELECT 1")[0].decode(0, as: Int.self), 1)
        XCTAssertEqual(proxy.openConnections, 1)
        proxy.stop()
        // A closed socket needs no deadline: even the blocking path notices at once.
        XCTAssertThrowsError(try connection.query("SELECT 1")) { error in
            XCTAssertTrue((error as? PostgresError)?.isConnectionError == true, "\(error)")
        }
        XCTAssertEqual(proxy.openConnections, 0)
        XCTAssertThrowsError(try connection.reconnect())
    }

    func testThawBeforeTheDeadlineLetsTheStatementFinish() throws {
        let connection = try PostgresConnection(proxiedURL, settings: settings(queryTimeout: .seconds(10)))
        defer { connection.close() }
        proxy.freeze()
        let proxy = self.proxy!
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.5) { proxy.thaw() }
        // Nothing was closed while frozen: the held bytes go through after the thaw.
        XCTAssertEqual(try connection.query("SELECT $1::text", ["held"])[0].decode(0, as: String.self), "held")
        XCTAssertTrue(connection.isOpen)
        XCTAssertEqual(proxy.acceptedConnections, 1)
    }

    func testCommitWithoutAnAnswerIsAConnectionErrorNotASuccess() throws {
        let connection = try PostgresConnection(proxiedURL, settings: settings(queryTimeout: .seconds(1)))
        defer { connection.close() }
        XCTAssertThrowsError(
            try connection.transaction { conn in
                try conn.query("SELECT 1")
                proxy.freeze()  // the body returns, so the next thing sent is COMMIT
            }
        ) { error in
            XCTAssertTrue((error as? PostgresError)?.isConnectionError == true, "\(error)")
            XCTAssertTrue("\(error)".contains("no answer from PostgreSQL"), "\(error)")
        }
        XCTAssertFalse(connection.isOpen)
    }

    func testAFrozenListenerIsNoticedByPingAndReconnectListensAgain() throws {
        let listener = try PostgresConnection(proxiedURL, settings: settings(queryTimeout: .seconds(5)))
        defer { listener.close() }
        try listener.listen("courier_dead_peer")
        XCTAssertNoThrow(try listener.ping(timeout: .seconds(1)))
        proxy.freeze()
        // Waiting alone cannot tell a frozen peer from a quiet channel.
        XCTAssertEqual(try listener.waitForNotifications(timeout: .milliseconds(200)), [])
        let start = Date()
        XCTAssertThrowsError(try listener.ping(timeout: .milliseconds(500))) { error in
            XCTAssertTrue((error as? PostgresError)?.isConnectionError == true, "\(error)")
            XCTAssertEqual(
                (error as? PostgresError)?.message, "no answer from PostgreSQL within 0.5 s; connection closed")
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 1.5)
        proxy.thaw()
        try listener.reconnect()
        let sender = try PostgresConnection(serverURL)
        defer { sender.close() }
        try sender.notify("courier_dead_peer", payload: "after")
        XCTAssertEqual(try listener.waitForNotifications(timeout: .seconds(5)).map(\.payload), ["after"])
    }

    func testPingOnABlockingConnectionWorksAndLeavesItUsable() throws {
        let connection = try PostgresConnection(proxiedURL)
        defer { connection.close() }
        try connection.listen("courier_ping_channel")
        try connection.ping(timeout: .seconds(2))
        // A notification that arrives around a ping is kept for the next wait.
        let sender = try PostgresConnection(serverURL)
        defer { sender.close() }
        try sender.notify("courier_ping_channel", payload: "kept")
        Thread.sleep(forTimeInterval: 0.2)
        try connection.ping(timeout: .seconds(2))
        XCTAssertEqual(try connection.waitForNotifications(timeout: .seconds(5)).map(\.payload), ["kept"])
        XCTAssertEqual(try connection.query("SELECT $1::int", [5])[0].decode(0, as: Int.self), 5)
        try connection.simpleQuery("CREATE TEMP TABLE copied (n int)")
        XCTAssertEqual(try connection.copyIn("COPY copied (n) FROM STDIN", chunks: [Array("1\n2\n".utf8)]), 2)
    }

    func testCopyInWorksOnADeadlineConnection() throws {
        let connection = try PostgresConnection(proxiedURL, settings: settings(queryTimeout: .seconds(5)))
        defer { connection.close() }
        try connection.simpleQuery("CREATE TEMP TABLE copied (n int, filler text)")
        // Far more than a socket buffer, so a non-blocking PQputCopyData would have to retry.
        let filler = String(repeating: "f", count: 200)
        let chunks = (0..<50).map { chunk in
            Array((0..<1000).map { "\(chunk * 1000 + $0)\t\(filler)\n" }.joined().utf8)
        }
        XCTAssertEqual(try connection.copyIn("COPY copied (n, filler) FROM STDIN", chunks: chunks), 50_000)
        XCTAssertEqual(try connection.query("SELECT count(*) FROM copied")[0].decode(0, as: Int.self), 50_000)
    }

    func testAStatementLargerThanTheSocketBuffersIsSentUnderTheDeadline() throws {
        let connection = try PostgresConnection(proxiedURL, settings: settings(queryTimeout: .seconds(20)))
        defer { connection.close() }
        let big = String(repeating: "x", count: 8 * 1024 * 1024)
        XCTAssertEqual(try connection.query("SELECT length($1::text)", [big])[0].decode(0, as: Int.self), big.count)
        let result = try connection.query("SELECT repeat('y', 8 * 1024 * 1024)")
        XCTAssertEqual(try result[0].decode(0, as: String.self).count, 8 * 1024 * 1024)
    }

    func testALargeStatementIntoAFrozenPeerStillEndsAtTheDeadline() throws {
        let connection = try PostgresConnection(proxiedURL, settings: settings(queryTimeout: .seconds(1)))
        defer { connection.close() }
        proxy.freeze()
        // More than the socket buffers hold: libpq cannot finish sending, the flush loop waits.
        let big = String(repeating: "z", count: 16 * 1024 * 1024)
        let start = Date()
        XCTAssertThrowsError(try connection.query("SELECT length($1::text)", [big])) { error in
            XCTAssertTrue((error as? PostgresError)?.isConnectionError == true, "\(error)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 2.5)
    }
}
