import Crypto
import CourierCore
import CourierSink
import CourierTesting
import CourierWorker
import Foundation
import Postgres
import XCTest

/// The worker against a real PostgreSQL and a real HTTP server on 127.0.0.1.
final class DeliveryOutcomeTests: WorkerTestCase {
    private var sink: HTTPSink!

    override func setUp() async throws {
        url = try TestDatabase.shared(label: "worker")
        probe = try JobsProbe(url: url)
        queue = "w\(UInt32.random(in: 0...UInt32.max))"
        let log = self.log
        sink = try await HTTPSink.start { request in
            let job = request.header("courier-job-id") ?? "?"
            let n = log.record(request, key: job)
            switch request.path {
            case "/ok": return .respond(status: 200, body: Array("fine".utf8))
            case "/flaky": return n <= 2 ? .respond(status: 503) : .respond(status: 200)
            case "/down": return .respond(status: 503, body: Array("maintenance".utf8))
            case "/bad": return .respond(status: 400, body: Array(#"{"error":"nope"}"#.utf8))
            case "/slowdown": return .respond(status: 429, headers: [("Retry-After", "2")])
            default: return .respond(status: 404)
            }
        }
        sinks.append(sink)
    }

    func testSuccessOnFirstTry() throws {
        let id = try probe.enqueue(url: sink.baseURL + "/ok", queue: queue)
        try startPool(requestTimeout: .seconds(5))
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(10)))
        let job = try probe.job(id)
        XCTAssertEqual(job.state, "succeeded")
        XCTAssertEqual(job.attempt, 1)
        XCTAssertEqual(job.lastStatus, 200)
        XCTAssertEqual(try probe.attemptCount(id), 1)
        let excerpt: String? = try probe.connection.query(
            "SELECT response_excerpt FROM courier.attempts WHERE job_id = $1", [id])[0].decode(0)
        XCTAssertEqual(excerpt, "fine")
    }

    func testTwo503sThenSuccessSucceedsWithThreeAttemptRows() throws {
        let id = try probe.enqueue(url: sink.baseURL + "/flaky", queue: queue, maxAttempts: 5)
        try startPool(requestTimeout: .seconds(5))
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(15)))
        XCTAssertEqual(try probe.job(id).state, "succeeded")
        XCTAssertEqual(try probe.job(id).attempt, 3)
        XCTAssertEqual(try probe.attemptCount(id), 3)
        let statuses = try probe.connection.query(
            "SELECT status FROM courier.attempts WHERE job_id = $1 ORDER BY id", [id]
        ).rows.map { try $0.decode(0, as: Int.self) }
        XCTAssertEqual(statuses, [503, 503, 200])
    }

    func testAlways503WithThreeMaxAttemptsDeadLettersAfterThree() throws {
        let id = try probe.enqueue(url: sink.baseURL + "/down", queue: queue, maxAttempts: 3)
        try startPool(requestTimeout: .seconds(5))
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(15)))
        let job = try probe.job(id)
        XCTAssertEqual(job.state, "dead")
        XCTAssertEqual(job.attempt, 3)
        XCTAssertEqual(job.lastStatus, 503)
        XCTAssertTrue(job.lastError?.contains("attempts exhausted") == true, job.lastError ?? "")
        XCTAssertEqual(try probe.attemptCount(id), 3)
    }

    func testBadRequestDeadLettersAfterOneAttempt() throws {
        let id = try probe.enqueue(url: sink.baseURL + "/bad", queue: queue, maxAttempts: 5)
        try startPool(requestTimeout: .seconds(5))
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(10)))
        let job = try probe.job(id)
        XCTAssertEqual(job.state, "dead")
        XCTAssertEqual(job.attempt, 1)
        XCTAssertEqual(job.lastStatus, 400)
        XCTAssertEqual(try probe.attemptCount(id), 1)
    }

    func testRetryAfterPostponesTheNextAttempt() throws {
        let id = try probe.enqueue(url: sink.baseURL + "/slowdown", queue: queue, maxAttempts: 5)
        let pool = try startPool(requestTimeout: .seconds(5))
        let deadline = Date().addingTimeInterval(10)
        while try probe.attemptCount(id) == 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        pool.shutdown()
        let row = try probe.connection.query(
            """
            SELECT j.state::text, extract(epoch FROM j.run_at - a.finished_at)::float8, j.last_status, j.attempt,
                   j.postponements
            FROM courier.jobs j JOIN courier.attempts a ON a.job_id = j.id WHERE j.id = $1
            """, [id])[0]
        // 429 with Retry-After: rescheduled without spending the attempt (no attempt counted
        // yet, so the job is pending again), one postponement counted, the attempt row kept.
        XCTAssertEqual(try row.decode(0, as: String.self), "pending")
        XCTAssertGreaterThanOrEqual(try row.decode(1, as: Double.self), 1.95)
        XCTAssertEqual(try row.decode(2, as: Int.self), 429)
        XCTAssertEqual(try row.decode(3, as: Int.self), 0)
        XCTAssertEqual(try row.decode(4, as: Int.self), 1)
    }

    func testRequestCarriesDedupHeadersAndAValidSignature() throws {
        let key = Array((0..<32).map { UInt8($0) })
        let secret = "whsec_" + Data(key).base64EncodedString()
        try probe.connection.query("INSERT INTO courier.queues (name, signing_secret) VALUES ($1, $2)", [queue, secret])
        let id = try probe.enqueue(url: sink.baseURL + "/ok", queue: queue)
        try startPool(requestTimeout: .seconds(5))
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(10)))
        let request = try XCTUnwrap(log.all.first)
        XCTAssertEqual(request.header("courier-job-id"), String(id))
        XCTAssertEqual(request.header("courier-attempt"), "1")
        XCTAssertEqual(request.header("content-type"), "application/json")
        let webhookID = try XCTUnwrap(request.header("webhook-id"))
        let timestamp = try XCTUnwrap(request.header("webhook-timestamp"))
        let signature = try XCTUnwrap(request.header("webhook-signature"))
        XCTAssertLessThan(abs(Double(timestamp)! - Date().timeIntervalSince1970), 60)
        var signed = Array("\(webhookID).\(timestamp).".utf8)
        signed += request.body
        let mac = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: key))
        XCTAssertEqual(signature, "v1," + Data(mac).base64EncodedString())
        XCTAssertEqual(String(decoding: request.body, as: UTF8.self), #"{"hello": "world"}"#)
    }

    func testUnsignedDeliveriesCarryAStableWebhookIDAndATimestamp() throws {
        let id = try probe.enqueue(url: sink.baseURL + "/flaky", queue: queue, maxAttempts: 5)
        try startPool(requestTimeout: .seconds(5))
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(10)))
        let requests = log.all.filter { $0.header("courier-job-id") == String(id) }
        XCTAssertEqual(requests.count, 3, "two 503s, then 200")
        XCTAssertEqual(Set(requests.compactMap { $0.header("webhook-id") }), ["job_\(id)"], "the same id on every attempt")
        XCTAssertEqual(requests.map { $0.header("courier-attempt") }, ["1", "2", "3"])
        for request in requests {
            let timestamp = try XCTUnwrap(request.header("webhook-timestamp").flatMap(Double.init))
            XCTAssertLessThan(abs(timestamp - Date().timeIntervalSince1970), 60)
            XCTAssertNil(request.header("webhook-signature"), "an unsigned queue sends no signature")
        }
    }

    func testPrivateTargetIsRefusedWithoutTheFlagAndTheSinkSeesNothing() throws {
        let id = try probe.enqueue(url: sink.baseURL + "/ok", queue: queue, maxAttempts: 5)
        try startPool(allowPrivateTargets: false, requestTimeout: .seconds(5))
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(10)))
        let job = try probe.job(id)
        XCTAssertEqual(job.state, "dead")
        XCTAssertEqual(job.attempt, 1)
        XCTAssertTrue(job.lastError?.contains("private") == true, job.lastError ?? "")
        XCTAssertEqual(log.all.count, 0)
    }
}
