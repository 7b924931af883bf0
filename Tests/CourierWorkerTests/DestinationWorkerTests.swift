import CourierCore
import CourierSink
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Destinations with real worker processes and a real receiver on 127.0.0.1: the cluster-wide
/// cap, the breaker and 410 Gone as a receiver sees them.
final class DestinationWorkerTests: WorkerTestCase {
    override func setUp() async throws {
        url = try TestDatabase.shared(label: "destinationworkers")
        probe = try JobsProbe(url: url)
        queue = "d\(UInt32.random(in: 0...UInt32.max))"
        try probe.forgetDestinations()
    }

    func testTwoWorkersNeverRunMoreThanTheCapAtOneSlowReceiver() async throws {
        let log = self.log
        let hold = 0.4
        let sink = try await HTTPSink.start { request in
            log.begin("all")
            try? await Task.sleep(nanoseconds: UInt64(hold * 1e9))
            log.end("all")
            return .respond(status: 200)
        }
        sinks.append(sink)
        for _ in 0..<60 { try probe.enqueue(url: sink.baseURL + "/slow", queue: queue) }
        // Each worker alone could run only 5: reaching 6 or more needs both, and the cap must
        // stop them at 8, below their 10 slots together.
        _ = try startWorkerProcess(["--per-host-limit", "8", "--concurrency", "5"])
        _ = try startWorkerProcess(["--per-host-limit", "8", "--concurrency", "5"])
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(60)))
        XCTAssertEqual(try probe.states(queue: queue), ["succeeded": 60])
        // The receiver's own count of requests it was answering at once.
        XCTAssertLessThanOrEqual(log.maxOverlap, 8, "more than the cap ran at the receiver")
        XCTAssertGreaterThanOrEqual(log.maxOverlap, 6, "the two workers never ran together; the test proves nothing")
        let workers = try probe.connection.query(
            "SELECT count(DISTINCT worker) FROM courier.attempts a JOIN courier.jobs j ON j.id = a.job_id WHERE j.queue = $1",
            [queue])[0].decode(0, as: Int.self)
        XCTAssertEqual(workers, 2, "both workers took part")
    }

    /// A worker goes round the hosts from claim to claim: host a's five jobs are the oldest,
    /// yet with one slot (claims of one job) every other host's first job is sent before a's
    /// second. A loop that lost its place between claims would send a's jobs first.
    func testOneWorkerGoesRoundTheHostsFromClaimToClaim() async throws {
        let log = self.log
        let sink = try await HTTPSink.start { request in
            log.record(request, key: "all")
            return .respond(status: 200)
        }
        sinks.append(sink)
        for _ in 0..<5 { try probe.enqueue(url: "http://a.localhost:\(sink.port)/", queue: queue) }
        for name in ["b", "c", "d", "e", "f"] {
            try probe.enqueue(url: "http://\(name).localhost:\(sink.port)/", queue: queue)
        }
        _ = try startWorkerProcess(["--concurrency", "1", "--resolve", "*.localhost=127.0.0.1"])
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(60)))
        XCTAssertEqual(try probe.states(queue: queue), ["succeeded": 10])
        let hosts = log.all.map { ($0.header("host") ?? "?").split(separator: ":").first.map(String.init) ?? "?" }
        XCTAssertEqual(
            Array(hosts.prefix(6)), ["a", "b", "c", "d", "e", "f"].map { "\($0).localhost" },
            "every host's first job before any host's second: \(hosts)")
        XCTAssertEqual(Array(hosts.dropFirst(6)), Array(repeating: "a.localhost", count: 4))
    }

    func testFailingEndpointSpendsNoAttemptsWhileItsBreakerIsOpen() async throws {
        let sink = try await HTTPSink.start { request in
            request.path == "/fail" ? .respond(status: 500) : .respond(status: 200)
        }
        sinks.append(sink)
        let port = sink.port
        var change = DestinationSettingsChange()
        change.breakerThreshold = 3
        change.breakerCooldown = .seconds(3600)
        try DestinationStore(connection: probe.connection).update("failing.localhost", change)
        for _ in 0..<30 {
            try probe.enqueue(url: "http://failing.localhost:\(port)/fail", queue: queue, maxAttempts: 10, retrySeconds: [0.1])
        }
        let healthy = try (0..<20).map { _ in
            try probe.enqueue(url: "http://healthy.localhost:\(port)/ok", queue: queue)
        }
        _ = try startWorkerProcess(["--per-host-limit", "2", "--resolve", "*.localhost=127.0.0.1"])
        XCTAssertTrue(try waitFor(30) { try healthy.allSatisfy { try probe.job($0).state == "succeeded" } })
        // A 500 is the endpoint's failure: its own breaker opens, not the host's.
        XCTAssertTrue(try waitFor(30) {
            try probe.connection.query(
                """
                SELECT opened_at IS NOT NULL
                       AND NOT EXISTS (SELECT 1 FROM courier.jobs WHERE host = h.host AND state = 'running')
                FROM courier.endpoint_health h WHERE key = $1
                """, ["http://failing.localhost:\(port)/fail"]
            ).rows.first?.decode(0, as: Bool.self) ?? false
        })
        let before = try probe.connection.query(
            """
            SELECT count(*) FROM courier.attempts a JOIN courier.jobs j ON j.id = a.job_id
            WHERE j.queue = $1 AND j.host = 'failing.localhost'
            """, [queue])[0].decode(0, as: Int.self)
        // Three failures open it; at most the cap's worth were already on their way.
        XCTAssertGreaterThanOrEqual(before, 3)
        XCTAssertLessThanOrEqual(before, 3 + 2)
        // While it stays open (retries of 0.1 s would otherwise hammer it), nothing more is sent.
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let after = try probe.connection.query(
            """
            SELECT count(*) FROM courier.attempts a JOIN courier.jobs j ON j.id = a.job_id
            WHERE j.queue = $1 AND j.host = 'failing.localhost'
            """, [queue])[0].decode(0, as: Int.self)
        XCTAssertEqual(after, before, "attempts were spent while the breaker was open")
        let waiting = try probe.connection.query(
            "SELECT count(*) FROM courier.jobs WHERE queue = $1 AND host = 'failing.localhost' AND state IN ('pending', 'retrying')",
            [queue])[0].decode(0, as: Int.self)
        XCTAssertEqual(waiting, 30, "every failing-host job waits; none is dead")
    }

    func testGoneDisablesTheHostParksItsJobsAndEnableDeliversThem() async throws {
        let gone = SharedFlag(true)
        let sink = try await HTTPSink.start { _ in gone.value ? .respond(status: 410) : .respond(status: 200) }
        sinks.append(sink)
        let ids = try (0..<5).map { _ in
            try probe.enqueue(url: "http://gone.localhost:\(sink.port)/hook", queue: queue, maxAttempts: 1)
        }
        _ = try startWorkerProcess(["--per-host-limit", "1", "--resolve", "*.localhost=127.0.0.1"])
        XCTAssertTrue(try waitFor(20) {
            try probe.connection.query(
                "SELECT disabled_at IS NOT NULL FROM courier.destinations WHERE host = 'gone.localhost'"
            ).rows.first?.decode(0, as: Bool.self) ?? false
        })
        try await Task.sleep(nanoseconds: 500_000_000)
        for id in ids {
            let job = try probe.job(id)
            XCTAssertEqual(job.state, "pending", "parked, not dead")
            XCTAssertEqual(job.attempt, 0, "410 spends no attempt")
        }
        let listed = try CourierRunner.run(["hosts", "list", "gone.localhost", "--json"], databaseURL: url)
        XCTAssertEqual(listed.status, 0, listed.stderr)
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(rows.first?["disabled"] as? Bool, true)
        XCTAssertEqual((rows.first?["due"] as? NSNumber)?.intValue, 5)
        gone.value = false
        let enabled = try CourierRunner.run(["hosts", "enable", "gone.localhost"], databaseURL: url)
        XCTAssertEqual(enabled.status, 0, enabled.stderr)
        XCTAssertTrue(try waitFor(20) { try ids.allSatisfy { try probe.job($0).state == "succeeded" } })
    }
}
