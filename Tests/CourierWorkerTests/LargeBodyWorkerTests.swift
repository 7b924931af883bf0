import Crypto
import CourierCore
import CourierSink
import CourierTesting
import CourierWorker
import Foundation
import XCTest

/// Bodies above the 64 KiB a claim carries: read from PostgreSQL just before their delivery,
/// within the worker's body budget, and sent whole and correctly signed.
final class LargeBodyWorkerTests: WorkerTestCase {
    override func setUp() async throws {
        url = try TestDatabase.shared(label: "worker")
        probe = try JobsProbe(url: url)
        queue = "big\(UInt32.random(in: 0...UInt32.max))"
        let log = self.log
        // Holds each request a while, so deliveries that the budget lets through overlap here.
        sinks.append(
            try await HTTPSink.start { request in
                log.begin("all")
                try? await Task.sleep(for: .milliseconds(150))
                log.record(request, key: request.header("courier-job-id") ?? "?")
                log.end("all")
                return .respond(status: 200)
            })
    }

    /// Enqueues `count` jobs whose bodies are `size` bytes, each different; returns them by id.
    private func enqueue(_ count: Int, size: Int) throws -> [Int64: [UInt8]] {
        var bodies: [Int64: [UInt8]] = [:]
        for n in 0..<count {
            var random = SystemRandomNumberGenerator()
            let body = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
            let id: Int64 = try probe.connection.query(
                "SELECT courier.enqueue_raw(url => $1, body => $2, queue => $3, headers => '{\"Content-Type\": \"application/octet-stream\"}')",
                [sinks[0].baseURL + "/big/\(n)", body, queue])[0].decode(0)
            bodies[id] = body
        }
        return bodies
    }

    func testLargeBodiesArriveWholeAndSignedWithAtMostTheBudgetInFlight() throws {
        let key = Array((0..<32).map { UInt8($0 &* 7) })
        let secret = "whsec_" + Data(key).base64EncodedString()
        try probe.connection.query("INSERT INTO courier.queues (name, signing_secret) VALUES ($1, $2)", [queue, secret])
        let size = 200 * 1024
        let bodies = try enqueue(12, size: size)
        try startPool { $0.bodyBudget = 3 * size }
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(30)))
        XCTAssertEqual(try probe.states(queue: queue), ["succeeded": 12])
        let requests = log.all
        XCTAssertEqual(requests.count, 12)
        for request in requests {
            let id = try XCTUnwrap(request.header("courier-job-id").flatMap { Int64($0) })
            XCTAssertEqual(request.body.count, size)
            XCTAssertTrue(request.body == bodies[id], "job \(id): the body arrived changed")
            XCTAssertEqual(request.header("content-length"), String(size))
            let webhookID = try XCTUnwrap(request.header("webhook-id"))
            let timestamp = try XCTUnwrap(request.header("webhook-timestamp"))
            let signed = Array("\(webhookID).\(timestamp).".utf8) + request.body
            let mac = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: key))
            XCTAssertEqual(request.header("webhook-signature"), "v1," + Data(mac).base64EncodedString())
        }
        // 16 slots and one claim of all 12, but only three bodies' worth of bytes at once.
        XCTAssertLessThanOrEqual(log.maxOverlap, 3, "more bodies in flight than the budget holds")
        XCTAssertGreaterThanOrEqual(log.maxOverlap, 2, "the budget should let several bodies go at once")
    }

    func testABodyLargerThanTheWholeBudgetStillGoesAlone() throws {
        let bodies = try enqueue(3, size: 300 * 1024)
        try startPool { $0.bodyBudget = 100 * 1024 }
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(30)))
        XCTAssertEqual(try probe.states(queue: queue), ["succeeded": 3])
        for request in log.all {
            let id = try XCTUnwrap(request.header("courier-job-id").flatMap { Int64($0) })
            XCTAssertTrue(request.body == bodies[id])
        }
        XCTAssertEqual(log.maxOverlap, 1)
    }
}
