import CourierClient
import CourierSink
import CourierTesting
import Foundation
import Logging
import PostgresNIO
import Postgres
import XCTest

/// `CourierClient` on a real PostgreSQL through postgres-nio, as a Swift service runs it: jobs
/// and messages exist exactly when the caller's transaction commits, and every refusal of the
/// SQL API arrives as a typed error that names what was wrong and writes nothing.
final class CourierClientTests: XCTestCase {
    private var databaseURL = ""
    private var check: Postgres.PostgresConnection!
    private let client = CourierClient()
    private let logger = Logger(label: "test.client")

    override func setUpWithError() throws {
        databaseURL = try TestDatabase.create(label: "client")
        check = try Postgres.PostgresConnection(databaseURL)
    }

    override func tearDown() {
        check?.close()
        TestDatabase.drop(databaseURL)
    }

    /// A postgres-nio connection to `url`, as `role` when given.
    private func connect(_ url: String? = nil, role: String? = nil) async throws -> PostgresNIO.PostgresConnection {
        let components = try XCTUnwrap(URLComponents(string: url ?? databaseURL))
        let configuration = PostgresNIO.PostgresConnection.Configuration(
            host: components.host ?? "127.0.0.1", port: components.port ?? 5432,
            username: role ?? components.user ?? "postgres", password: components.password,
            database: String(components.path.dropFirst()), tls: .disable)
        return try await PostgresNIO.PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
    }

    private func count(_ sql: String, _ parameters: [any Postgres.PostgresEncodable] = []) throws -> Int {
        try check.query(sql, parameters)[0].decode(0, as: Int.self)
    }

    func testEnqueueInTheCallersTransactionExistsOnlyOnceCommitted() async throws {
        let connection = try await connect()
        try await connection.query("BEGIN", logger: logger)
        let rolledBack = try await client.enqueue(CourierJob(url: "https://a.example/hook", body: [1, 2]), on: connection)
        try await connection.query("ROLLBACK", logger: logger)
        XCTAssertEqual(try count("SELECT count(*)::int FROM courier.jobs WHERE id = $1", [rolledBack]), 0)

        let id = try await connection.withTransaction(logger: logger) { connection in
            try await client.enqueue(
                try CourierJob(
                    url: "https://a.example/orders", json: ["order": 7], headers: ["X-Trace": "t1"], queue: "orders",
                    runAt: Date().addingTimeInterval(3600), maxAttempts: 4, idempotencyKey: "order-7", priority: -3,
                    retrySchedule: [.seconds(1.5), .seconds(60)]),
                on: connection)
        }
        let row = try check.query("""
            SELECT url, convert_from(body, 'UTF8'), method, headers->>'X-Trace', headers->>'Content-Type', queue,
                   run_at > now() + interval '59 minutes', max_attempts, idempotency_key, priority,
                   retry_schedule::text
            FROM courier.jobs WHERE id = $1
            """, [id])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "https://a.example/orders")
        XCTAssertEqual(try row.decode(1, as: String.self), #"{"order":7}"#)
        XCTAssertEqual(try row.decode(2, as: String.self), "POST")
        XCTAssertEqual(try row.decode(3, as: String.self), "t1")
        XCTAssertEqual(try row.decode(4, as: String.self), "application/json")
        XCTAssertEqual(try row.decode(5, as: String.self), "orders")
        XCTAssertEqual(try row.decode(6, as: Bool.self), true)
        XCTAssertEqual(try row.decode(7, as: Int.self), 4)
        XCTAssertEqual(try row.decode(8, as: String.self), "order-7")
        XCTAssertEqual(try row.decode(9, as: Int.self), -3)
        XCTAssertEqual(try row.decode(10, as: String.self), #"{00:00:01.5,00:01:00}"#)
        // The same idempotency key in the same queue returns the first job.
        let again = try await client.enqueue(
            CourierJob(url: "https://a.example/orders", queue: "orders", idempotencyKey: "order-7"), on: connection)
        XCTAssertEqual(again, id)
        try await connection.close()
    }

    /// What the producer wrote in a committed transaction reaches the receiver through a real
    /// worker; what it wrote in a rolled-back one never does.
    func testTheWorkerDeliversACommittedJobAndNeverARolledBackOne() async throws {
        let received = ReceivedBodies()
        let sink = try await HTTPSink.start { request in
            received.add(String(decoding: request.body, as: UTF8.self))
            return .respond(status: 200)
        }
        let connection = try await connect()
        try await connection.query("BEGIN", logger: logger)
        _ = try await client.enqueue(
            try CourierJob(url: sink.baseURL + "/hook", json: ["order": "rolled-back"], queue: "client"), on: connection)
        try await connection.query("ROLLBACK", logger: logger)
        let id = try await connection.withTransaction(logger: logger) { connection in
            try await client.enqueue(
                try CourierJob(url: sink.baseURL + "/hook", json: ["order": "committed"], queue: "client"), on: connection)
        }
        try await connection.close()

        let worker = Process()
        worker.executableURL = URL(fileURLWithPath: CourierBinary.path)
        worker.arguments = [
            "worker", "--database-url", databaseURL, "--queues", "client", "--allow-private-targets",
            "--poll-interval", "100ms", "--log-level", "error",
        ]
        worker.standardOutput = FileHandle.nullDevice
        worker.standardError = FileHandle.nullDevice
        try worker.run()
        defer {
            if worker.isRunning { kill(worker.processIdentifier, SIGTERM) }
            waitForExit(worker)
        }
        let deadline = Date().addingTimeInterval(20)
        var state = ""
        while Date() < deadline {
            state = try check.query("SELECT state::text FROM courier.jobs WHERE id = $1", [id])[0].decode(0, as: String.self)
            if state == "succeeded" { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        await sink.shutdown()
        XCTAssertEqual(state, "succeeded")
        XCTAssertEqual(received.all, [#"{"order":"committed"}"#])
        XCTAssertEqual(try count("SELECT count(*)::int FROM courier.jobs"), 1)
    }

    func testEnqueueManyKeepsTheOrderAndOneBadJobRefusesTheBatch() async throws {
        let connection = try await connect()
        let jobs = (0..<50).map { CourierJob(url: "https://b.example/\($0)", body: Array("\($0)".utf8), queue: "many") }
        let ids = try await client.enqueueMany(jobs, on: connection)
        XCTAssertEqual(ids.count, 50)
        XCTAssertEqual(ids, ids.sorted())
        let urls: [String] = try check.query(
            "SELECT url FROM courier.jobs WHERE id = ANY ($1::bigint[]) ORDER BY id", [Postgres.PostgresArray(ids)]
        ).rows.map { try $0.decode(0) }
        XCTAssertEqual(urls, jobs.map(\.url))
        let empty = try await client.enqueueMany([], on: connection)
        XCTAssertEqual(empty, [])

        let before = try count("SELECT count(*)::int FROM courier.jobs")
        let cases: [(jobs: [CourierJob], says: String)] = [
            (jobs + [CourierJob(url: "ftp://c.example/")], "url"),
            ([CourierJob(url: "https://c.example/", method: "BREW")], "method"),
            ([CourierJob(url: "https://c.example/", headers: ["Bad Name": "x"])], "header"),
            ([CourierJob(url: "https://c.example/", queue: "")], "queue"),
            ([CourierJob(url: "https://c.example/", maxAttempts: 0)], "max_attempts"),
            ([CourierJob(url: "https://c.example/", priority: 9_999_999_999)], "priority"),
            ([CourierJob(url: "https://c.example/", retrySchedule: [.seconds(-1)])], "retry_schedule"),
        ]
        for (bad, says) in cases {
            do {
                _ = try await client.enqueueMany(bad, on: connection)
                XCTFail("\(says): accepted")
            } catch let error as CourierClientError {
                XCTAssertEqual(error.kind, .invalidInput, "\(says): \(error)")
                XCTAssertTrue(error.message.lowercased().contains(says.lowercased()), "\(says): \(error.message)")
                XCTAssertFalse(error.message.contains("\n"), error.message)
            }
        }
        XCTAssertEqual(try count("SELECT count(*)::int FROM courier.jobs"), before, "a refused batch writes nothing")
        try await connection.close()
    }

    func testPublishFansOutInTheTransactionAndRefusesABadEventType() async throws {
        try check.simpleQuery("""
            INSERT INTO courier.endpoints (tenant, url, event_types) VALUES
                ('acme', 'https://acme.example/a', '{order.*}'), ('acme', 'https://acme.example/b', '{*}'),
                ('other', 'https://other.example/', '{*}')
            """)
        struct Paid: Encodable { var order: Int; var amount: Double }
        let connection = try await connect()
        let message = try await connection.withTransaction(logger: logger) { connection in
            try await client.publish(
                eventType: "order.paid", payload: Paid(order: 7, amount: 12.5), tenant: "acme", idempotencyKey: "paid-7",
                on: connection)
        }
        XCTAssertEqual(try count("SELECT count(*)::int FROM courier.jobs WHERE message_id = $1", [message]), 2)
        let repeated = try await client.publish(
            eventType: "order.paid", payloadJSON: #"{"order": 7}"#, tenant: "acme", idempotencyKey: "paid-7", on: connection)
        XCTAssertEqual(repeated, message)
        XCTAssertEqual(try count("SELECT count(*)::int FROM courier.jobs WHERE message_id = $1", [message]), 2)
        let data = try check.query("SELECT payload::text FROM courier.messages WHERE id = $1", [message])[0].decode(0, as: String.self)
        XCTAssertEqual(data, #"{"order": 7, "amount": 12.5}"#)

        for (type, payload) in [("Order Paid", "{}"), ("order.paid", "not json")] {
            do {
                _ = try await client.publish(eventType: type, payloadJSON: payload, tenant: "acme", on: connection)
                XCTFail("\(type) \(payload): accepted")
            } catch let error as CourierClientError {
                XCTAssertEqual(error.kind, .invalidInput, "\(error)")
            }
        }
        XCTAssertEqual(try count("SELECT count(*)::int FROM courier.messages"), 1)
        try await connection.close()
    }

    func testAJobsTraceparentIsStoredAndAMalformedOneIsRefused() async throws {
        let producer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let fromSetting = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let connection = try await connect()
        let ids = try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SET LOCAL courier.traceparent = '\(unescaped: fromSetting)'", logger: logger)
            return try await client.enqueueMany(
                [
                    CourierJob(url: "https://a.example/traced", traceparent: producer),
                    try CourierJob(url: "https://a.example/json", json: ["a": 1], traceparent: producer),
                    CourierJob(url: "https://a.example/setting"),
                ], on: connection)
        }
        var stored: [String?] = []
        for id in ids {
            stored.append(try check.query("SELECT traceparent FROM courier.jobs WHERE id = $1", [id])[0].decode(0))
        }
        XCTAssertEqual(stored, [producer, producer, fromSetting])
        do {
            _ = try await client.enqueue(CourierJob(url: "https://a.example/bad", traceparent: "00-bad"), on: connection)
            XCTFail("a malformed traceparent was accepted")
        } catch let error as CourierClientError {
            XCTAssertEqual(error.kind, .invalidInput, "\(error)")
            XCTAssertTrue(error.message.hasPrefix("traceparent must be a W3C trace context"), error.message)
        }
        XCTAssertEqual(try count("SELECT count(*)::int FROM courier.jobs"), 3)
        try await connection.close()
    }

    func testPublishPassesTheTraceparentToEveryDelivery() async throws {
        try check.simpleQuery("""
            INSERT INTO courier.endpoints (url, event_types) VALUES
                ('https://a.example/one', '{*}'), ('https://a.example/two', '{order.*}')
            """)
        let producer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let connection = try await connect()
        let message = try await client.publish(
            eventType: "order.paid", payload: ["order": 7], traceparent: producer, on: connection)
        XCTAssertEqual(
            try count("SELECT count(*)::int FROM courier.jobs WHERE message_id = $1 AND traceparent = $2", [message, producer]),
            2)
        do {
            _ = try await client.publish(eventType: "order.paid", payloadJSON: "{}", traceparent: "bad", on: connection)
            XCTFail("a malformed traceparent was accepted")
        } catch let error as CourierClientError {
            XCTAssertEqual(error.kind, .invalidInput, "\(error)")
        }
        XCTAssertEqual(try count("SELECT count(*)::int FROM courier.messages"), 1)
        try await connection.close()
    }

    func testAnUnmigratedDatabaseAndAMissingGrantSayWhatToDo() async throws {
        let empty = try TestDatabase.createEmpty(label: "clientempty")
        defer { TestDatabase.drop(empty) }
        let bare = try await connect(empty)
        do {
            _ = try await client.enqueue(CourierJob(url: "https://a.example/"), on: bare)
            XCTFail("enqueued into a database without the schema")
        } catch let error as CourierClientError {
            XCTAssertEqual(error.kind, .schemaMissing)
            XCTAssertTrue(error.message.contains("courier migrate"), error.message)
        }
        try await bare.close()

        let role = "client_\(UInt32.random(in: 0...UInt32.max))"
        try check.simpleQuery("CREATE ROLE \(role) LOGIN")
        defer { try? check.simpleQuery("DROP OWNED BY \(role); DROP ROLE \(role)") }
        let stranger = try await connect(role: role)
        do {
            _ = try await client.publish(eventType: "order.paid", payloadJSON: "{}", on: stranger)
            XCTFail("published without courier_producer")
        } catch let error as CourierClientError {
            XCTAssertEqual(error.kind, .permissionDenied)
            XCTAssertTrue(error.message.contains("courier_producer"), error.message)
        }
        try await stranger.close()

        try check.simpleQuery("GRANT courier_producer TO \(role)")
        let producer = try await connect(role: role)
        let id = try await client.enqueue(CourierJob(url: "https://a.example/"), on: producer)
        XCTAssertGreaterThan(id, 0)
        try await producer.close()
    }
}

/// Request bodies a sink received, from its threads.
private final class ReceivedBodies: @unchecked Sendable {
    private let lock = NSLock()
    private var bodies: [String] = []
    func add(_ body: String) { lock.withLock { bodies.append(body) } }
    var all: [String] { lock.withLock { bodies } }
}
