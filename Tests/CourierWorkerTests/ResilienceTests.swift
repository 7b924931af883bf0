import CourierCore
import CourierSink
import CourierTesting
import CourierWorker
import Foundation
import Logging
import Postgres
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Losing workers, the database, or an endpoint loses no job.
final class ResilienceTests: WorkerTestCase {
    override func setUp() async throws {
        url = try TestDatabase.shared(label: "resilience")
        probe = try JobsProbe(url: url)
        queue = "r\(UInt32.random(in: 0...UInt32.max))"
    }

    /// A sink that records each request, tracks overlap per job, and answers after `delay`.
    private func startSink(host: String = "127.0.0.1", delay: Double = 0) async throws -> HTTPSink {
        let log = self.log
        let sink = try await HTTPSink.start(host: host) { request in
            let job = request.header("courier-job-id") ?? "?"
            log.record(request, key: job)
            log.begin(job)
            if delay > 0 { try? await Task.sleep(nanoseconds: UInt64(delay * 1e9)) }
            log.end(job)
            return .respond(status: 200)
        }
        sinks.append(sink)
        return sink
    }

    private func startPool(id: String, concurrency: Int = 16, perHostLimit: Int = 32, lease: Duration = .seconds(60)) throws {
        var http = HTTPDelivererConfiguration()
        http.allowPrivateTargets = true
        var logger = Logger(label: "test.worker")
        logger.logLevel = .error
        let deliverer = HTTPDeliverer(configuration: http, logger: logger)
        let pool = WorkerPool(
            databaseURL: url,
            configuration: WorkerConfiguration(
                workerID: id, queues: [queue], concurrency: concurrency, batchSize: 10, pollInterval: .milliseconds(100),
                leaseDuration: lease, heartbeatInterval: lease / 4, perHostLimit: perHostLimit,
                capDeferral: .milliseconds(50), maintenanceInterval: .milliseconds(500)),
            deliverer: deliverer, logger: logger)
        try pool.start()
        deliverers.append(deliverer)
        pools.append(pool)
    }

    func testTwoPoolsNeverDeliverTheSameJobConcurrently() async throws {
        let sink = try await startSink(delay: 0.01)
        let ids = try (0..<200).map { _ in try probe.enqueue(url: sink.baseURL + "/x", queue: queue) }
        try startPool(id: "pool-a")
        try startPool(id: "pool-b")
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(60)))
        XCTAssertEqual(try probe.states(queue: queue), ["succeeded": 200])
        XCTAssertEqual(log.maxOverlap, 1)
        XCTAssertEqual(log.counts.count, ids.count)
        XCTAssertEqual(Set(log.counts.values), [1])
        let workers = try probe.connection.query(
            "SELECT DISTINCT worker FROM courier.attempts a JOIN courier.jobs j ON j.id = a.job_id WHERE j.queue = $1",
            [queue]
        ).rowCount
        XCTAssertEqual(workers, 2, "both pools should have taken part")
    }

    func testKilledWorkerProcessLosesNoJob() async throws {
        let sink = try await startSink(delay: 1.0)
        let ids = try (0..<6).map { _ in try probe.enqueue(url: sink.baseURL + "/x", queue: queue, maxAttempts: 5) }
        let (process, _) = try startWorkerProcess(["--lease", "2s"])
        // Wait until it holds jobs mid-delivery, then kill -9.
        let deadline = Date().addingTimeInterval(20)
        while log.all.count < 3, Date() < deadline { try await Task.sleep(nanoseconds: 20_000_000) }
        XCTAssertGreaterThanOrEqual(log.all.count, 3, "the worker process never delivered")
        kill(process.processIdentifier, SIGKILL)
        waitForExit(process)
        XCTAssertGreaterThan(try probe.states(queue: queue)["running", default: 0], 0)
        try startPool(id: "rescuer", lease: .seconds(2))
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(30)))
        XCTAssertEqual(try probe.states(queue: queue), ["succeeded": ids.count])
    }

    func testSigtermLetsInFlightDeliveriesFinishAndExitsZero() async throws {
        let sink = try await startSink(delay: 1.0)
        let ids = try (0..<4).map { _ in try probe.enqueue(url: sink.baseURL + "/x", queue: queue) }
        let (process, errors) = try startWorkerProcess(["--grace-period", "10s"])
        let deadline = Date().addingTimeInterval(20)
        while log.all.count < ids.count, Date() < deadline { try await Task.sleep(nanoseconds: 20_000_000) }
        XCTAssertEqual(log.all.count, ids.count)
        kill(process.processIdentifier, SIGTERM)
        waitForExit(process)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(process.terminationStatus, 0, stderr)
        XCTAssertEqual(try probe.states(queue: queue), ["succeeded": ids.count])
    }

    func testSigtermAfterTheGracePeriodRecordsUnfinishedDeliveriesAsInterruptedAndDueAgain() async throws {
        let sink = try await startSink(delay: 5.0)
        let ids = try (0..<3).map { _ in try probe.enqueue(url: sink.baseURL + "/x", queue: queue) }
        let (process, _) = try startWorkerProcess(["--grace-period", "200ms"])
        let deadline = Date().addingTimeInterval(20)
        while log.all.count < 3, Date() < deadline { try await Task.sleep(nanoseconds: 20_000_000) }
        kill(process.processIdentifier, SIGTERM)
        waitForExit(process)
        XCTAssertEqual(process.terminationStatus, 0)
        // Each request was sent once: each job has that attempt counted, one attempt row saying
        // it was interrupted, and is due again at once for another worker.
        XCTAssertEqual(try probe.states(queue: queue), ["retrying": 3])
        for id in ids {
            XCTAssertEqual(try probe.job(id).attempt, 1)
            XCTAssertEqual(try probe.attemptCount(id), 1)
            XCTAssertEqual(try probe.job(id).lastError?.hasPrefix("interrupted"), true)
        }
        let due: Bool = try probe.connection.query(
            "SELECT bool_and(run_at <= now()) FROM courier.jobs WHERE queue = $1", [queue])[0].decode(0)
        XCTAssertTrue(due)
    }

    func testWorkerSurvivesAPostgreSQLRestart() async throws {
        let pgctl = try self.pgctl()
        let sink = try await startSink(delay: 0.05)
        _ = try (0..<40).map { _ in try probe.enqueue(url: sink.baseURL + "/x", queue: queue) }
        try startPool(id: "survivor", concurrency: 4)
        let deadline = Date().addingTimeInterval(20)
        while log.all.count < 5, Date() < deadline { try await Task.sleep(nanoseconds: 20_000_000) }
        probe.close()
        XCTAssertEqual(runShellCommand("\(pgctl) -m fast -w -t 60 restart"), 0, "pg_ctl restart failed")
        probe = try JobsProbe(url: url)
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(60)))
        XCTAssertEqual(try probe.states(queue: queue), ["succeeded": 40])
    }

    func testSlowHostDoesNotHoldUpAnotherHostBeyondTheCap() async throws {
        // The slow host answers nothing until the test opens the gate, so every fast-host job
        // must succeed while the slow host's requests are still held, however long that takes.
        let gate = Gate()
        defer { gate.open() }
        let slowLog = SinkLog()
        let slow = try await HTTPSink.start(host: "127.0.0.1") { request in
            slowLog.record(request, key: request.header("courier-job-id") ?? "?")
            await gate.wait()
            return .respond(status: 200)
        }
        sinks.append(slow)
        let fast = try await startSink(host: "127.0.0.2", delay: 0)
        // The slow host's jobs come first in claim order.
        let slowIDs = try (0..<12).map { _ in try probe.enqueue(url: slow.baseURL + "/slow", queue: queue, priority: -1) }
        let fastIDs = try (0..<10).map { _ in try probe.enqueue(url: fast.baseURL + "/fast", queue: queue, priority: 0) }
        try startPool(id: "fair", concurrency: 8, perHostLimit: 2)
        // 30 s only bound the test; the gate, not the time, is what holds the slow host back.
        let deadline = Date().addingTimeInterval(30)
        var fastDone = 0
        while Date() < deadline {
            fastDone = try fastIDs.filter { try probe.job($0).state == "succeeded" }.count
            if fastDone == fastIDs.count { break }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        XCTAssertEqual(fastDone, fastIDs.count, "fast-host jobs waited for the slow host")
        let slowFinished = try slowIDs.filter { try probe.job($0).state == "succeeded" }.count
        XCTAssertEqual(slowFinished, 0, "the slow host answered while the gate was shut")
        XCTAssertLessThanOrEqual(slowLog.all.count, 2, "no more than the cap reached the slow host at once")
    }
}
