import CourierCore
import CourierTesting
import CourierWorker
import Foundation
import Logging
import XCTest

/// Rows written around `courier.enqueue` (constraints dropped, as an old version, a restore or a
/// producer with table rights could leave them) through a real worker and real PostgreSQL: each
/// goes dead alone with a clear reason and not one byte reaches the receiver.
final class HandWrittenRowWireTests: XCTestCase {
    private var url: String!
    private var probe: JobsProbe!
    private var queue: String!
    private var pool: WorkerPool?
    private var deliverer: HTTPDeliverer?
    private var servers: [RawTCPServer] = []

    override func setUp() async throws {
        url = try TestDatabase.shared(label: "wire")
        probe = try JobsProbe(url: url)
        queue = "wire\(UInt32.random(in: 0...UInt32.max))"
    }

    override func tearDown() async throws {
        pool?.shutdown()
        deliverer?.shutdown()
        for server in servers { try await server.stop() }
        probe?.close()
    }

    /// A real worker on this test's queue, private targets allowed (the receivers are on loopback).
    private func startWorker(totalTimeout: Duration) throws {
        var http = HTTPDelivererConfiguration()
        http.allowPrivateTargets = true
        http.totalTimeout = totalTimeout
        var logger = Logger(label: "test.wire")
        logger.logLevel = .critical
        let deliverer = HTTPDeliverer(configuration: http, logger: logger)
        self.deliverer = deliverer
        let pool = WorkerPool(
            databaseURL: url,
            configuration: WorkerConfiguration(
                workerID: "wire-\(queue!)", queues: [queue], concurrency: 8, pollInterval: .milliseconds(100)),
            deliverer: deliverer, logger: logger)
        try pool.start()
        self.pool = pool
    }

    func testSmugglingAndCrashingRowsGoDeadWithoutAByteOnTheWire() async throws {
        let receiver = try await RawTCPServer.start(script: .respond(RawTCPServer.responseHead(contentLength: 0)))
        let healthyReceiver = try await RawTCPServer.start(
            script: .respond(RawTCPServer.responseHead(contentLength: 0)))
        servers = [receiver, healthyReceiver]
        let target = "http://127.0.0.1:\(receiver.port)/hook"
        try probe.dropRowGuards()

        func row(_ column: String, _ value: String, cast: String = "") throws -> Int64 {
            let id = try probe.enqueue(url: target, queue: queue)
            try probe.connection.query("UPDATE courier.jobs SET \(column) = $2\(cast) WHERE id = $1", [id, value])
            return id
        }
        func headers(_ pairs: [String: String]) throws -> String {
            String(decoding: try JSONSerialization.data(withJSONObject: pairs), as: UTF8.self)
        }
        let poison: [(Int64, String)] = [
            (try row("method", "GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST /EVIL"), "invalid request: method:"),
            (try row("headers", try headers(["X-A": "1\r\n\r\nPOST /EVIL HTTP/1.1\r\nHost: x"]), cast: "::jsonb"),
             "invalid request: headers: the value of X-A"),
            (try row("headers", try headers(["X-Ünï": "v"]), cast: "::jsonb"), "invalid request: headers:"),
            (try row("url", "http://127.0.0.1:99999/hook"), "invalid request: url: port"),
            (try row("url", target + "\r\nX-Evil: 1"), "invalid request: url:"),
        ]
        let healthy = try probe.enqueue(url: "http://127.0.0.1:\(healthyReceiver.port)/ok", queue: queue)

        try startWorker(totalTimeout: .seconds(5))

        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(20)), "jobs still unsettled")
        for (id, reason) in poison {
            let job = try probe.job(id)
            XCTAssertEqual(job.state, "dead", "job \(id)")
            XCTAssertEqual(job.attempt, 1, "job \(id) was attempted again")
            XCTAssertTrue(job.lastError?.hasPrefix(reason) ?? false, "job \(id): \(String(describing: job.lastError))")
            XCTAssertFalse(job.lastError?.contains("\r") ?? true, "job \(id): CR echoed into last_error")
        }
        XCTAssertEqual(try probe.job(healthy).state, "succeeded")
        XCTAssertEqual(healthyReceiver.connections, 1)
        XCTAssertEqual(receiver.connections, 0, "a hand-written row reached the receiver")
        XCTAssertEqual(receiver.bytesReceived, 0)
    }

    func testTricklingReceiverJobIsSettledWithinTheTotalTimeout() async throws {
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 300)
        let receiver = try await RawTCPServer.start(
            script: .trickleBody(head: RawTCPServer.responseHead(contentLength: body.count), body: body, interval: 1))
        servers = [receiver]
        let id = try probe.enqueue(url: "http://127.0.0.1:\(receiver.port)/slow", queue: queue, maxAttempts: 1)

        let start = ContinuousClock.now
        try startWorker(totalTimeout: .seconds(2))

        // Total timeout 2 s + 5 s: before, the 300-byte trickle kept the job running for 300 s.
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(7)), "still running after 7 s")
        let elapsed = ContinuousClock.now - start
        let job = try probe.job(id)
        XCTAssertEqual(job.state, "dead")
        XCTAssertTrue(job.lastError?.hasSuffix("timeout after 2 s") ?? false, String(describing: job.lastError))
        XCTAssertLessThan(elapsed, .seconds(7))
    }
}
