import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// The webhook layer's SQL: `courier.publish`, endpoints, secrets, messages, re-send and
/// recovery. Each test works in its own tenant of a shared database (sealing is the caller's;
/// here a stand-in of the right size, since CourierCore never sees the key).
final class WebhookStoreTests: XCTestCase {
    private var connection: PostgresConnection!
    private var store: WebhookStore!
    private var tenant = ""

    override func setUpWithError() throws {
        connection = try PostgresConnection(try TestDatabase.shared(label: "webhooks"))
        store = WebhookStore(connection: connection)
        tenant = "t\(UInt64.random(in: 0...UInt64.max))"
    }

    override func tearDown() {
        connection?.close()
    }

    private func fakeSeal(_ id: Int64) -> [UInt8] { (0..<60).map { _ in UInt8.random(in: 0...255) } }

    @discardableResult
    private func add(_ patterns: [String], filter: String? = nil, tenant: String? = nil, path: String = "hook") throws -> Int64 {
        try store.addEndpoint(
            NewEndpoint(url: "https://receiver.example/\(path)", eventTypes: patterns, tenant: tenant ?? self.tenant,
                        payloadFilter: filter),
            seal: fakeSeal)
    }

    /// The jobs of `message`, after checking that `courier.deliveries` links exactly those jobs
    /// (with their endpoints) to it: every statement that writes deliveries writes their links.
    private func deliveries(_ message: Int64, file: StaticString = #filePath, line: UInt = #line) throws
        -> [(endpoint: Int64, webhookID: String, body: String)]
    {
        let pairs = "SELECT %@, endpoint_id FROM %@ WHERE message_id = $1 ORDER BY 1"
        let jobs: [[Int64]] = try connection.query(String(format: pairs, "id", "courier.jobs"), [message]).rows
            .map { [try $0.decode(0), try $0.decode(1)] }
        let links: [[Int64]] = try connection.query(String(format: pairs, "job_id", "courier.deliveries"), [message]).rows
            .map { [try $0.decode(0), try $0.decode(1)] }
        XCTAssertEqual(links, jobs, "the links of message \(message)", file: file, line: line)
        return try connection.query("""
            SELECT endpoint_id, headers->>'webhook-id', convert_from(body, 'UTF8') FROM courier.jobs
            WHERE message_id = $1 ORDER BY endpoint_id, id
            """, [message]).rows.map { (try $0.decode(0), try $0.decode(1), try $0.decode(2)) }
    }

    func testEveryWebhookStatementPrepares() throws {
        let statements = [
            WebhookStatements.insertEndpoint.sql, WebhookStatements.insertSecret.sql, WebhookStatements.retireSecret.sql,
            WebhookStatements.validSecrets.sql, WebhookStatements.anySecret.sql, WebhookStatements.listEndpoints.sql,
            WebhookStatements.endpoint.sql, WebhookStatements.updateEndpoint.sql, WebhookStatements.disableEndpoint.sql,
            WebhookStatements.enableEndpoint.sql, WebhookStatements.cancelEndpointDeliveries.sql,
            WebhookStatements.deleteEndpoint.sql, WebhookStatements.publish.sql, WebhookStatements.published.sql, WebhookStatements.listMessages.sql,
            WebhookStatements.message.sql, WebhookStatements.messageDeliveries.sql, WebhookStatements.resend.sql,
            WebhookStatements.recover.sql, WebhookStatements.purgeMessages.sql, WebhookStatements.endpointDeliveries.sql,
        ]
        for (index, sql) in statements.enumerated() {
            XCTAssertNoThrow(try connection.prepare(name: "webhook_\(index)", sql: sql), sql)
        }
    }

    /// A table of endpoints and events: each publish reaches exactly the endpoints whose tenant,
    /// patterns and payload filter match, and every delivery carries the message's webhook-id.
    func testPublishReachesExactlyTheMatchingEndpoints() throws {
        let other = tenant + "-other"
        let exact = try add(["invoice.paid"])
        let prefix = try add(["invoice.*"])
        let deepPrefix = try add(["invoice.line.*"])
        let everything = try add(["*"])
        let none = try add([])
        let filtered = try add(["invoice.*"], filter: #"{"amount": {"currency": "EUR"}}"#)
        let otherTenant = try add(["*"], tenant: other)
        let disabled = try add(["*"])
        try store.disableEndpoint(disabled, reason: "customer paused it")
        _ = none

        let cases: [(type: String, payload: String, tenant: String?, expected: Set<Int64>)] = [
            ("invoice.paid", #"{"amount": {"currency": "USD", "value": 5}}"#, tenant, [exact, prefix, everything]),
            ("invoice.paid", #"{"amount": {"currency": "EUR", "value": 5}}"#, tenant, [exact, prefix, everything, filtered]),
            ("invoice.line.added", "{}", tenant, [prefix, deepPrefix, everything]),
            ("invoice", "{}", tenant, [everything]),
            ("invoicex.paid", "{}", tenant, [everything]),
            ("order.paid", "[1, 2]", tenant, [everything]),
            ("order.paid", "{}", other, [otherTenant]),
            ("order.paid", "{}", nil, []),
        ]
        for (index, c) in cases.enumerated() {
            let result = try store.publish(eventType: c.type, payload: c.payload, tenant: c.tenant)
            let got = try deliveries(result.messageID)
            XCTAssertEqual(Set(got.map(\.endpoint)), c.expected, "case \(index): \(c.type) \(c.payload)")
            XCTAssertEqual(result.endpoints, c.expected.count, "case \(index)")
            XCTAssertFalse(result.duplicate)
            XCTAssertTrue(got.allSatisfy { $0.webhookID == "msg_\(result.messageID)" }, "case \(index)")
            for delivery in got {
                let body = try JSONSerialization.jsonObject(with: Data(delivery.body.utf8)) as? [String: Any]
                XCTAssertEqual(body?["type"] as? String, c.type)
                XCTAssertNotNil(body?["timestamp"] as? String)
                XCTAssertNotNil(body?["data"])
            }
        }
    }

    func testARolledBackPublishCreatesNothing() throws {
        try add(["*"])
        let before = try connection.query("SELECT count(*)::int FROM courier.messages WHERE tenant = $1", [tenant])[0]
            .decode(0, as: Int.self)
        try connection.simpleQuery("BEGIN")
        let published = try store.publish(eventType: "order.paid", payload: "{}", tenant: tenant)
        XCTAssertEqual(try deliveries(published.messageID).count, 1)
        try connection.simpleQuery("ROLLBACK")
        XCTAssertEqual(
            try connection.query("SELECT count(*)::int FROM courier.messages WHERE tenant = $1", [tenant])[0].decode(0, as: Int.self),
            before)
        XCTAssertEqual(try deliveries(published.messageID).count, 0)
        XCTAssertNil(try store.message(published.messageID))
    }

    func testTheSameIdempotencyKeyReturnsTheFirstMessageAndFansOutOnce() throws {
        try add(["*"])
        let first = try store.publish(eventType: "order.paid", payload: #"{"n": 1}"#, tenant: tenant, idempotencyKey: "order-1")
        let again = try store.publish(eventType: "order.paid", payload: #"{"n": 2}"#, tenant: tenant, idempotencyKey: "order-1")
        XCTAssertEqual(first.messageID, again.messageID)
        XCTAssertTrue(again.duplicate)
        XCTAssertEqual(try deliveries(first.messageID).count, 1)
        // Another tenant's key is its own.
        let elsewhere = try store.publish(eventType: "order.paid", payload: "{}", tenant: tenant + "-b", idempotencyKey: "order-1")
        XCTAssertNotEqual(elsewhere.messageID, first.messageID)
    }

    func testAConcurrentPublishOfTheSameKeyWaitsAndReturnsTheFirstMessage() throws {
        try add(["*"])
        let url = try TestDatabase.shared(label: "webhooks")
        let other = try PostgresConnection(url)
        defer { other.close() }
        try connection.simpleQuery("BEGIN")
        let first = try store.publish(eventType: "order.paid", payload: "{}", tenant: tenant, idempotencyKey: "race")
        let tenant = self.tenant
        let second = UncheckedResult()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            second.value = Result { try WebhookStore(connection: other).publish(
                eventType: "order.paid", payload: "{}", tenant: tenant, idempotencyKey: "race") }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 0.5), .timedOut, "the second publish waits for the first's commit")
        try connection.simpleQuery("COMMIT")
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        let again = try XCTUnwrap(try second.value?.get())
        XCTAssertEqual(again.messageID, first.messageID)
        XCTAssertTrue(again.duplicate)
        XCTAssertEqual(try deliveries(first.messageID).count, 1, "one fan-out")
    }

    func testAMessageThatMatchesNoEndpointIsKept() throws {
        let result = try store.publish(eventType: "nobody.listens", payload: "{}", tenant: tenant)
        XCTAssertEqual(result.endpoints, 0)
        let detail = try XCTUnwrap(try store.message(result.messageID))
        XCTAssertEqual(detail.message.endpoints, 0)
        XCTAssertEqual(detail.deliveries, [])
        XCTAssertEqual(detail.payloadJSON, "{}")
    }

    func testBadInputGetsOneClearErrorAndWritesNothing() throws {
        let endpointsBefore = try connection.query("SELECT count(*)::int FROM courier.endpoints")[0].decode(0, as: Int.self)
        let bad: [(NewEndpoint, String)] = [
            (NewEndpoint(url: "https://x.example/h", eventTypes: ["invoice.*.paid"], tenant: tenant), "event_types"),
            (NewEndpoint(url: "https://x.example/h", eventTypes: ["in voice"], tenant: tenant), "event_types"),
            (NewEndpoint(url: "https://x.example/h", eventTypes: [""], tenant: tenant), "event_types"),
            (NewEndpoint(url: "ftp://x.example/h", eventTypes: ["*"], tenant: tenant), "url"),
            (NewEndpoint(url: "https://x.example/h", eventTypes: ["*"], tenant: tenant, payloadFilter: "[1]"), "payload_filter"),
            (NewEndpoint(url: "https://x.example/h", eventTypes: ["*"], tenant: tenant, headers: [("webhook-id", "x")]), "headers"),
            (NewEndpoint(url: "https://x.example/h", eventTypes: ["*"], tenant: tenant, headers: [("X-A", "a\nb")]), "header"),
            (NewEndpoint(url: "https://x.example/h", eventTypes: ["*"], tenant: ""), "tenant"),
            (NewEndpoint(url: "https://x.example/h", eventTypes: ["*"], tenant: tenant, queue: "no spaces"), "queue"),
            (NewEndpoint(url: "https://x.example/h", eventTypes: ["*"], tenant: tenant, rateLimit: 0), "rate_limit"),
            (NewEndpoint(url: "https://x.example/h", eventTypes: ["*"], tenant: tenant, rateLimit: .infinity), "rate_limit"),
            // 63 headers of its own and the two every delivery adds are more than a job may carry.
            (NewEndpoint(url: "https://x.example/h", eventTypes: ["*"], tenant: tenant,
                         headers: (1...63).map { ("X-H\($0)", "v") }), "headers"),
        ]
        for (endpoint, field) in bad {
            XCTAssertThrowsError(try store.addEndpoint(endpoint, seal: fakeSeal), "\(endpoint)") { error in
                let error = error as? PostgresError
                XCTAssertEqual(error?.sqlState, "22023", "\(endpoint)")
                XCTAssertTrue(error?.message.contains(field) ?? false, "\(error?.message ?? "") names \(field)")
            }
        }
        // A filter that is not JSON at all fails as the JSON parser says.
        XCTAssertThrowsError(try store.addEndpoint(
            NewEndpoint(url: "https://x.example/h", eventTypes: ["*"], tenant: tenant, payloadFilter: "{nope"), seal: fakeSeal))
        XCTAssertEqual(try connection.query("SELECT count(*)::int FROM courier.endpoints")[0].decode(0, as: Int.self), endpointsBefore)
        XCTAssertEqual(try connection.query("SELECT count(*)::int FROM courier.endpoint_secrets s WHERE NOT EXISTS "
            + "(SELECT 1 FROM courier.endpoints e WHERE e.id = s.endpoint_id)")[0].decode(0, as: Int.self), 0)

        for (type, payload, message) in [("", "{}", "event_type"), ("a..b", "{}", "event_type"), ("a.*", "{}", "event_type")] {
            XCTAssertThrowsError(try store.publish(eventType: type, payload: payload, tenant: tenant)) { error in
                XCTAssertTrue((error as? PostgresError)?.message.contains(message) ?? false, "\(error)")
            }
        }
        try add(["*"])
        let big = "{\"blob\": \"" + String(repeating: "x", count: 1_048_576) + "\"}"
        XCTAssertThrowsError(try store.publish(eventType: "a.b", payload: big, tenant: tenant)) { error in
            XCTAssertTrue((error as? PostgresError)?.message.contains("at most 1 MiB") ?? false, "\(error)")
        }
        XCTAssertEqual(try connection.query("SELECT count(*)::int FROM courier.messages WHERE tenant = $1", [tenant])[0]
            .decode(0, as: Int.self), 0)
        XCTAssertThrowsError(try connection.query("SELECT courier.publish('a.b', NULL)")) { error in
            XCTAssertTrue((error as? PostgresError)?.message.contains("payload") ?? false, "\(error)")
        }
        XCTAssertThrowsError(try store.updateEndpoint(Int64.max, { var c = EndpointChange(); c.url = "https://a.example"; return c }())) {
            XCTAssertEqual(($0 as? WebhookError)?.notFound, true)
        }
        XCTAssertThrowsError(try store.disableEndpoint(Int64.max, reason: "x")) { XCTAssertEqual(($0 as? WebhookError)?.notFound, true) }
        XCTAssertThrowsError(try store.deleteEndpoint(-1)) { XCTAssertEqual(($0 as? WebhookError)?.notFound, true) }
        XCTAssertThrowsError(try store.resend(messageID: Int64.max)) { XCTAssertEqual(($0 as? WebhookError)?.notFound, true) }
        XCTAssertThrowsError(try store.recover(endpointID: 0, since: Date())) { XCTAssertEqual(($0 as? WebhookError)?.notFound, true) }
    }

    func testUpdateDisableEnableAndDelete() throws {
        let id = try add(["a.b"])
        var change = EndpointChange()
        change.eventTypes = ["order.*"]
        change.payloadFilter = .some(#"{"vip": true}"#)
        change.headers = [("X-Customer", "42")]
        change.rateLimit = .some(5)
        try store.updateEndpoint(id, change)
        var info = try XCTUnwrap(try store.endpoint(id))
        XCTAssertEqual(info.eventTypes, ["order.*"])
        XCTAssertEqual(info.payloadFilter, #"{"vip": true}"#)
        XCTAssertEqual(info.rateLimit, 5)
        XCTAssertTrue(info.headersJSON.contains("X-Customer"))
        XCTAssertEqual(info.validSecrets, 1)
        change = EndpointChange()
        change.payloadFilter = .some(nil)
        change.rateLimit = .some(nil)
        try store.updateEndpoint(id, change)
        info = try XCTUnwrap(try store.endpoint(id))
        XCTAssertNil(info.payloadFilter)
        XCTAssertNil(info.rateLimit)

        XCTAssertTrue(try store.disableEndpoint(id, reason: "first"))
        XCTAssertFalse(try store.disableEndpoint(id, reason: "second"))
        XCTAssertEqual(try store.endpoint(id)?.disabledReason, "first")
        XCTAssertEqual(try store.publish(eventType: "order.paid", payload: "{}", tenant: tenant).endpoints, 0)
        XCTAssertTrue(try store.enableEndpoint(id))
        XCTAssertFalse(try store.enableEndpoint(id))
        let message = try store.publish(eventType: "order.paid", payload: "{}", tenant: tenant)
        XCTAssertEqual(message.endpoints, 1)

        XCTAssertEqual(try store.deleteEndpoint(id), 1)
        XCTAssertNil(try store.endpoint(id))
        let detail = try XCTUnwrap(try store.message(message.messageID))
        XCTAssertEqual(detail.deliveries.map(\.state), [.cancelled])
        XCTAssertNil(detail.deliveries.first?.endpointURL)
        XCTAssertEqual(try connection.query("SELECT count(*)::int FROM courier.endpoint_secrets WHERE endpoint_id = $1", [id])[0]
            .decode(0, as: Int.self), 0)
    }

    func testRotationKeepsTheOldSecretUntilTheGraceEnds() throws {
        let id = try add(["*"])
        let first = try store.validSecrets(id)
        XCTAssertEqual(first.count, 1)
        let until = try XCTUnwrap(try store.rotateSecret(id, grace: .seconds(3600), seal: fakeSeal))
        XCTAssertEqual(until.timeIntervalSinceNow, 3600, accuracy: 60)
        let both = try store.validSecrets(id)
        XCTAssertEqual(both.count, 2)
        XCTAssertEqual(both.last?.sealed, first[0].sealed)
        XCTAssertNil(both.first?.expiresAt)
        // No grace: the old secret stops at once and only the newest signs.
        _ = try store.rotateSecret(id, grace: .zero, seal: fakeSeal)
        let now = try store.validSecrets(id)
        XCTAssertEqual(now.count, 2, "the one retired with an hour's grace still signs")
        XCTAssertFalse(now.contains { $0.sealed == both[0].sealed }, "the one retired with no grace stopped")
        XCTAssertEqual(try store.endpoint(id)?.validSecrets, 2)
        XCTAssertThrowsError(try store.rotateSecret(Int64.max, grace: .zero, seal: fakeSeal))
    }

    func testResendAndRecoverWriteLinkedJobsWithTheSameWebhookID() throws {
        let a = try add(["*"], path: "a")
        let b = try add(["*"], path: "b")
        let message = try store.publish(eventType: "order.paid", payload: #"{"id": 7}"#, tenant: tenant)
        let original = try deliveries(message.messageID)
        XCTAssertEqual(original.count, 2)
        let firstJobs = try connection.query(
            "SELECT id FROM courier.jobs WHERE message_id = $1 ORDER BY endpoint_id", [message.messageID]).rows.map { try $0.decode(0, as: Int64.self) }

        let all = try store.resend(messageID: message.messageID)
        XCTAssertEqual(all.map(\.endpointID), [a, b])
        XCTAssertEqual(all.map(\.resentFrom), firstJobs.map(Optional.some))
        let one = try store.resend(messageID: message.messageID, endpointID: b)
        XCTAssertEqual(one.map(\.resentFrom), [all[1].jobID])
        let after = try deliveries(message.messageID)
        XCTAssertEqual(after.count, 5)
        XCTAssertEqual(Set(after.map(\.webhookID)), ["msg_\(message.messageID)"])
        XCTAssertEqual(Set(after.map(\.body)).count, 1, "every delivery sends the same bytes")

        // Recover: only messages whose latest delivery to the endpoint is dead are sent again.
        let dead = try store.publish(eventType: "order.paid", payload: #"{"id": 8}"#, tenant: tenant)
        try connection.query("""
            UPDATE courier.jobs SET state = 'dead', finished_at = now(), last_error = 'HTTP 500'
            WHERE message_id = $1 AND endpoint_id = $2
            """, [dead.messageID, a])
        let old = try store.publish(eventType: "order.paid", payload: #"{"id": 9}"#, tenant: tenant)
        try connection.query("UPDATE courier.jobs SET state = 'dead', finished_at = now() WHERE message_id = $1", [old.messageID])
        try connection.query(
            "UPDATE courier.messages SET created_at = now() - interval '3 hours' WHERE id = $1", [old.messageID])
        let recovered = try store.recover(endpointID: a, since: Date().addingTimeInterval(-7200))
        XCTAssertEqual(recovered.map(\.messageID), [dead.messageID])
        XCTAssertEqual(try store.recover(endpointID: a, since: Date().addingTimeInterval(-7200)), [],
                       "the re-sent delivery is pending, not dead: nothing to recover twice")
        XCTAssertEqual(try store.recover(endpointID: b, since: Date().addingTimeInterval(-7200)), [])

        try store.disableEndpoint(a, reason: "paused")
        XCTAssertThrowsError(try store.resend(messageID: message.messageID, endpointID: a)) {
            XCTAssertTrue("\($0)".contains("disabled"), "\($0)")
        }
        let stranger = try add(["*"], tenant: tenant + "-x")
        XCTAssertThrowsError(try store.resend(messageID: message.messageID, endpointID: stranger)) {
            XCTAssertTrue("\($0)".contains("belongs to"), "\($0)")
        }
    }

    /// An endpoint's page lists its newest deliveries, re-sends included, newest first, and the
    /// rows come from `deliveries_endpoint_idx` rather than a scan of the jobs.
    func testEndpointDeliveriesAreTheNewestFirstThroughTheEndpointIndex() throws {
        let a = try add(["*"], path: "a")
        let b = try add(["*"], path: "b")
        let messages = try (0..<3).map { index in
            try store.publish(eventType: "order.paid", payload: #"{"n": \#(index)}"#, tenant: tenant).messageID
        }
        let resent = try store.resend(messageID: messages[0], endpointID: a)
        try connection.query(
            "UPDATE courier.jobs SET state = 'dead', finished_at = now(), last_status = 500, last_error = 'HTTP 500' WHERE id = $1",
            [resent[0].jobID])

        let newest = try store.endpointDeliveries(a, limit: 3)
        XCTAssertEqual(newest.map(\.messageID), [messages[0], messages[2], messages[1]])
        XCTAssertEqual(newest[0].jobID, resent[0].jobID)
        XCTAssertEqual(newest[0].resentFrom, resent[0].resentFrom)
        XCTAssertEqual(newest[0].state, .dead)
        XCTAssertEqual(newest[0].lastStatus, 500)
        XCTAssertEqual(newest[0].lastError, "HTTP 500")
        XCTAssertEqual(newest[1].state, .pending)
        XCTAssertNil(newest[1].resentFrom)
        XCTAssertEqual(try store.endpointDeliveries(a).count, 4)
        XCTAssertEqual(try store.endpointDeliveries(b).count, 3)
        XCTAssertEqual(try store.endpointDeliveries(Int64.max), [])

        let plan = try connection.transaction { connection -> String in
            // A handful of rows would be read with a bitmap scan and sorted; a long history is not.
            try connection.simpleQuery("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")
            return try connection.query("EXPLAIN " + WebhookStatements.endpointDeliveries.sql, [a, 20]).rows
                .map { try $0.decode(0, as: String.self) }.joined(separator: "\n")
        }
        XCTAssertTrue(plan.contains("deliveries_endpoint_idx"), plan)
        XCTAssertFalse(plan.contains("Sort"), "the index gives the order: \(plan)")
    }

    func testARateLimitSpacesTheFirstDeliveries() throws {
        let id = try store.addEndpoint(
            NewEndpoint(url: "https://slow.example/h", eventTypes: ["*"], tenant: tenant, rateLimit: 4), seal: fakeSeal)
        for _ in 0..<4 { _ = try store.publish(eventType: "a.b", payload: "{}", tenant: tenant) }
        let offsets: [Double] = try connection.query("""
            SELECT extract(epoch FROM run_at - (SELECT min(run_at) FROM courier.jobs WHERE endpoint_id = $1))::float8
            FROM courier.jobs WHERE endpoint_id = $1 ORDER BY id
            """, [id]).rows.map { try $0.decode(0) }
        XCTAssertEqual(offsets.count, 4)
        for (index, offset) in offsets.enumerated() {
            XCTAssertEqual(offset, Double(index) * 0.25, accuracy: 0.05, "delivery \(index)")
        }
    }

    func testListsAndMessageDetail() throws {
        let id = try add(["*"])
        let published = try store.publish(eventType: "user.created", payload: #"{"name": "Zoë"}"#, tenant: tenant)
        let listed = try store.listEndpoints(tenant: tenant)
        XCTAssertEqual(listed.map(\.id), [id])
        XCTAssertEqual(listed[0].recent.total, 1)
        XCTAssertEqual(listed[0].recent.waiting, 1)
        XCTAssertEqual(listed[0].recent.lastState, .pending)
        let messages = try store.listMessages(.init(tenant: tenant))
        XCTAssertEqual(messages.map(\.id), [published.messageID])
        XCTAssertEqual(messages[0].webhookID, "msg_\(published.messageID)")
        XCTAssertEqual(messages[0].deliveries.waiting, 1)
        let detail = try XCTUnwrap(try store.message(published.messageID))
        XCTAssertEqual(detail.payloadJSON, #"{"name": "Zoë"}"#)
        XCTAssertEqual(detail.deliveries.map(\.endpointID), [id])
        XCTAssertEqual(detail.deliveries.first?.endpointURL, "https://receiver.example/hook")
    }

    func testAProducerPublishesAndReadsStatusButNoSecret() throws {
        try add(["*"])
        let role = "producer_\(UInt32.random(in: 0...UInt32.max))"
        try connection.simpleQuery("CREATE ROLE \(role) LOGIN IN ROLE courier_producer")
        defer { try? connection.simpleQuery("DROP ROLE \(role)") }
        try connection.simpleQuery("BEGIN")
        defer { try? connection.simpleQuery("ROLLBACK") }
        try connection.simpleQuery("SET LOCAL ROLE \(role)")
        let id: Int64 = try connection.query("SELECT courier.publish('a.b', '{}', $1)", [tenant])[0].decode(0)
        let states: [String] = try connection.query(
            "SELECT state::text FROM courier.message_deliveries WHERE message_id = $1", [id]).rows.map { try $0.decode(0) }
        XCTAssertEqual(states, ["pending"])
        try connection.simpleQuery("SAVEPOINT s")
        XCTAssertThrowsError(try connection.query("SELECT sealed FROM courier.endpoint_secrets LIMIT 1")) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "42501")
        }
        try connection.simpleQuery("ROLLBACK TO SAVEPOINT s")
        XCTAssertThrowsError(try connection.query("INSERT INTO courier.endpoints (url) VALUES ('https://a.example')")) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "42501")
        }
    }

    func testMessagesWithoutDeliveriesArePurgedOnlyWhenOld() throws {
        let keptNew = try store.publish(eventType: "a.b", payload: "{}", tenant: tenant)
        let old = try store.publish(eventType: "a.b", payload: "{}", tenant: tenant)
        try add(["*"])
        let oldWithJob = try store.publish(eventType: "a.b", payload: "{}", tenant: tenant)
        try connection.query("UPDATE courier.messages SET created_at = now() - interval '40 days' WHERE id = ANY ($1::bigint[])",
                             [PostgresArray([old.messageID, oldWithJob.messageID])])
        _ = try store.purgeMessages(olderThan: .hours(30 * 24), limit: 1000)
        XCTAssertNotNil(try store.message(keptNew.messageID))
        XCTAssertNil(try store.message(old.messageID))
        XCTAssertNotNil(try store.message(oldWithJob.messageID), "its delivery still exists")

        // Retention removed its job: the message goes, and its link with it.
        try connection.query("DELETE FROM courier.jobs WHERE message_id = $1", [oldWithJob.messageID])
        XCTAssertEqual(try store.purgeMessages(olderThan: .hours(30 * 24), limit: 1000), 1)
        XCTAssertNil(try store.message(oldWithJob.messageID))
        XCTAssertEqual(try connection.query(
            "SELECT count(*)::int FROM courier.deliveries WHERE message_id = $1", [oldWithJob.messageID])[0].decode(0, as: Int.self), 0)
    }
}

/// A result handed from a thread to the test.
private final class UncheckedResult: @unchecked Sendable {
    var value: Result<PublishResult, any Error>?
}
