import CourierCore
import CourierTesting
import Postgres
import XCTest

/// The console connects as a member of `courier_operator`: every statement it runs works in
/// that role, and the audit rows it writes cannot be changed or deleted in it.
final class WebRoleTests: XCTestCase {
    func testOperatorRunsEveryConsoleStatementAndCannotRewriteTheAudit() throws {
        let url = try TestDatabase.create(label: "webrole")
        defer { TestDatabase.drop(url) }
        let connection = try PostgresConnection(url)
        defer { connection.close() }
        let id: Int64 = try connection.query(
            """
            INSERT INTO courier.jobs (queue, state, url, attempt, max_attempts, finished_at, last_error)
            VALUES ('billing', 'dead', 'https://a.example/x', 1, 5, now(), 'HTTP 500') RETURNING id
            """)[0].decode(0)
        try connection.simpleQuery("SET ROLE courier_operator")

        let web = WebStore(connection: connection)
        XCTAssertEqual(try web.queueOverview().map(\.name), ["billing"])
        // The overview's hour and the queue and host pages.
        try connection.simpleQuery("RESET ROLE")
        try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, worker)
            VALUES ($1, 1, now() - interval '2 minutes', now() - interval '2 minutes', 40, 500, 'w')
            """, [id])
        try connection.simpleQuery("SET ROLE courier_operator")
        let traffic = try web.traffic()
        XCTAssertEqual(traffic.all.minutes.count, 60)
        XCTAssertEqual(traffic.all.failed, 1)
        XCTAssertEqual(traffic.queue("billing").failed, 1)
        XCTAssertEqual(traffic.host("a.example").p50, 40)
        XCTAssertEqual(traffic.queue("other").attempts, 0)
        XCTAssertEqual(traffic.queue("other").minutes.count, 60)
        XCTAssertEqual(try web.queueDetail("billing")?.jobs[.dead], 1)
        XCTAssertNil(try web.queueDetail("other"))
        var filter = WebJobFilter()
        filter.state = .dead
        XCTAssertEqual(try web.jobs(filter, before: nil, limit: 10).jobs.map(\.id), [id])
        filter.urlContains = "a.example"
        XCTAssertEqual(try web.jobs(filter, before: nil, limit: 10).jobs.map(\.id), [id])
        let admin = AdminStore(connection: connection)
        XCTAssertNotNil(try admin.job(id))
        XCTAssertEqual(try admin.countDead(DeadJobFilter()).count, 1)
        XCTAssertEqual(try admin.requeueDead([id]).first?.changed, true)
        try admin.setPaused("billing", true)
        let destinations = DestinationStore(connection: connection)
        XCTAssertEqual(try destinations.list(limit: 10, defaultMaxInFlight: 200).map(\.host), ["a.example"])
        try destinations.disable("a.example", reason: "test")
        XCTAssertTrue(try destinations.enable("a.example"))
        try web.audit(WebAuditEntry(who: "alice", client: "127.0.0.1", action: "job.requeue", target: "job \(id)", jobs: 1))
        XCTAssertEqual(try connection.query("SELECT count(*)::int FROM courier.web_audit")[0].decode(0, as: Int.self), 1)

        for statement in ["UPDATE courier.web_audit SET who = 'mallory'", "DELETE FROM courier.web_audit"] {
            XCTAssertThrowsError(try connection.query(statement), statement) { error in
                XCTAssertEqual((error as? PostgresError)?.sqlState, "42501", "\(error)")
            }
        }
    }

    /// Every statement of `WebStatements` prepares against the schema, as `courier_operator`.
    func testEveryWebStatementPrepares() throws {
        let url = try TestDatabase.create(label: "webprepare")
        defer { TestDatabase.drop(url) }
        let connection = try PostgresConnection(url)
        defer { connection.close() }
        try connection.simpleQuery("SET ROLE courier_operator")
        let statements = [
            WebStatements.listJobs.sql, WebStatements.listJobsScanning.sql, WebStatements.queueOverview.sql,
            WebStatements.traffic.sql, WebStatements.queueSettings.sql, WebStatements.insertAudit.sql,
        ]
        for (index, sql) in statements.enumerated() {
            XCTAssertNoThrow(try connection.prepare(name: "web_\(index)", sql: sql), sql)
        }
    }

    /// The webhook pages' reads and actions work as `courier_operator` too.
    func testOperatorRunsEveryWebhookPageStatement() throws {
        let url = try TestDatabase.create(label: "webrolehooks")
        defer { TestDatabase.drop(url) }
        let connection = try PostgresConnection(url)
        defer { connection.close() }
        try connection.simpleQuery("SET ROLE courier_operator")
        let store = WebhookStore(connection: connection)
        let sealed: (Int64) -> [UInt8] = { _ in Array(repeating: 9, count: 40) }
        let endpoint = try store.addEndpoint(NewEndpoint(url: "https://a.example/in", eventTypes: ["*"], tenant: "acme"), seal: sealed)
        let message = try store.publish(eventType: "a.b", payload: "{}", tenant: "acme")
        XCTAssertEqual(try store.listEndpoints(tenant: "acme").map(\.id), [endpoint])
        XCTAssertEqual(try store.endpointDeliveries(endpoint).count, 1)
        XCTAssertEqual(try store.validSecrets(endpoint).count, 1)
        XCTAssertEqual(try store.listMessages(.init(tenant: "acme")).map(\.id), [message.messageID])
        XCTAssertEqual(try store.message(message.messageID)?.deliveries.count, 1)
        let entry = WebAuditEntry(who: "alice", client: "127.0.0.1", action: "message.resend", target: "t", jobs: 1)
        XCTAssertEqual(try store.resend(messageID: message.messageID) { _, connection in
            try WebStore(connection: connection).audit(entry)
        }.count, 1)
        XCTAssertNotNil(try store.rotateSecret(endpoint, grace: .hours(24), seal: sealed) { connection in
            try WebStore(connection: connection).audit(entry)
        })
        XCTAssertTrue(try store.disableEndpoint(endpoint, reason: "disabled in the web console by alice"))
        XCTAssertTrue(try store.enableEndpoint(endpoint))
        XCTAssertEqual(try connection.query("SELECT count(*)::int FROM courier.web_audit")[0].decode(0, as: Int.self), 2)
    }
}
