import CourierCore
import CourierSink
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Endpoint health with real `courier worker` processes and a real receiver on 127.0.0.1: one
/// hanging endpoint beside a healthy one at the same host, a host that refuses everything,
/// an ordered endpoint, and an endpoint disabled by its failing window.
final class EndpointHealthWorkerTests: WorkerTestCase {
    override func setUp() async throws {
        url = try TestDatabase.create(label: "endpointworkers")
        ownsDatabase = true
        probe = try JobsProbe(url: url)
        queue = "e\(UInt32.random(in: 0...UInt32.max))"
    }

    private func setBreaker(_ host: String, threshold: Int, cooldown: Duration) throws {
        var change = DestinationSettingsChange()
        change.breakerThreshold = threshold
        change.breakerCooldown = cooldown
        try DestinationStore(connection: probe.connection).update(host, change)
    }

    private func count(_ sql: String, _ values: [any PostgresEncodable] = []) throws -> Int {
        try probe.connection.query(sql, values)[0].decode(0, as: Int.self)
    }

    /// The case: one path of a shared host hangs. Before endpoint health the host's
    /// breaker opened, every probe was a hanging job, and none of the healthy path's jobs went.
    func testAHangingPathNeverHoldsBackAHealthyPathOfTheSameHost() async throws {
        let sink = try await HTTPSink.start { request in
            request.path.hasPrefix("/hang") ? .hang : .respond(status: 200)
        }
        sinks.append(sink)
        let host = "shared.localhost"
        try setBreaker(host, threshold: 3, cooldown: .seconds(1))
        _ = try startWorkerProcess(["--request-timeout", "1s", "--resolve", "*.localhost=127.0.0.1"])
        // Ten seconds (several cool-downs of the hanging path's breaker) of steady traffic to
        // both paths: 20 jobs a second each.
        var healthy: [Int64] = []
        let started = Date()
        while Date().timeIntervalSince(started) < 10 {
            try probe.enqueue(url: "http://\(host):\(sink.port)/hang?n=\(healthy.count)", queue: queue, maxAttempts: 20,
                              retrySeconds: [0.2])
            healthy.append(try probe.enqueue(url: "http://\(host):\(sink.port)/ok?n=\(healthy.count)", queue: queue))
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        XCTAssertTrue(try waitFor(10) {
            try self.count(
                "SELECT count(*) FROM courier.jobs WHERE id = ANY ($1) AND state = 'succeeded'", [PostgresArray(healthy)]
            ) == healthy.count
        }, "every healthy job was delivered")
        // Within its normal latency: enqueue to the first attempt's start, for each healthy job.
        let waits = try probe.connection.query(
            """
            SELECT extract(epoch FROM a.started_at - j.created_at)::float8
            FROM courier.jobs j JOIN courier.attempts a ON a.job_id = j.id AND a.attempt = 1
            WHERE j.id = ANY ($1)
            """, [PostgresArray(healthy)]
        ).rows.map { try $0.decode(0, as: Double.self) }.sorted()
        XCTAssertEqual(waits.count, healthy.count)
        let slow = waits.filter { $0 > 0.5 }.count
        print(
            "hanging beside healthy: \(healthy.count) healthy jobs, start p50 \(waits[waits.count / 2]) s, p99 "
                + "\(waits[waits.count * 99 / 100]) s, max \(waits.last ?? 0) s, \(slow) over 0.5 s")
        XCTAssertLessThanOrEqual(
            Double(slow), Double(healthy.count) * 0.01,
            "at least 99% of the healthy path started within 0.5 s; p50 \(waits[waits.count / 2]) s, max \(waits.last ?? 0) s")
        // The hanging path waits on its own breaker; the host's never opened.
        let key = "http://\(host):\(sink.port)/hang"
        XCTAssertEqual(
            try probe.connection.query("SELECT opened_at IS NOT NULL FROM courier.endpoint_health WHERE key = $1", [key])
                .rows.first?.decode(0, as: Bool.self), true)
        XCTAssertEqual(
            try count("SELECT count(*) FROM courier.destinations WHERE host = $1 AND opened_at IS NOT NULL", [host]), 0)
        let hanging = try count(
            "SELECT count(*) FROM courier.attempts a JOIN courier.jobs j ON j.id = a.job_id WHERE j.queue = $1 AND j.url LIKE '%/hang%'",
            [queue])
        // Up to a second's jobs hang before three timeouts open the breaker, then about one
        // probe per cool-down: nowhere near the 200 hanging jobs.
        print("hanging beside healthy: \(hanging) requests to the hanging path in 10 s")
        XCTAssertLessThanOrEqual(hanging, 60, "the hanging path got only probes once its breaker opened")
        XCTAssertGreaterThanOrEqual(
            try count(
                "SELECT count(*) FROM courier.jobs WHERE queue = $1 AND url LIKE '%/hang%' AND state IN ('pending', 'retrying')",
                [queue]), healthy.count * 7 / 10, "its jobs wait, spending no attempts")
    }

    func testAHostThatRefusesEveryConnectionOpensOneBreakerAndGetsOneProbePerCoolDown() async throws {
        // A port nothing listens on: a receiver's, closed again.
        let closed = try await HTTPSink.start { _ in .respond(status: 200) }
        let port = closed.port
        await closed.shutdown()
        let host = "refusing.localhost"
        try setBreaker(host, threshold: 3, cooldown: .seconds(1))
        for path in 0..<10 {
            for _ in 0..<3 {
                try probe.enqueue(url: "http://\(host):\(port)/\(path)", queue: queue, maxAttempts: 20, retrySeconds: [0.1])
            }
        }
        _ = try startWorkerProcess(["--resolve", "*.localhost=127.0.0.1", "--per-host-limit", "2"])
        XCTAssertTrue(try waitFor(20) {
            try self.count("SELECT count(*) FROM courier.destinations WHERE host = $1 AND opened_at IS NOT NULL", [host]) == 1
                && self.count("SELECT count(*) FROM courier.jobs WHERE queue = $1 AND state = 'running'", [self.queue!]) == 0
        })
        let attempts = "SELECT count(*) FROM courier.attempts a JOIN courier.jobs j ON j.id = a.job_id WHERE j.queue = $1 AND NOT a.in_process"
        let before = try count(attempts, [queue])
        try await Task.sleep(nanoseconds: 4_500_000_000)
        let probes = try count(attempts, [queue]) - before
        print("refusing host: \(probes) probes in 4.5 s with a 1 s cool-down and 10 endpoints")
        XCTAssertGreaterThanOrEqual(probes, 2, "probes went after each cool-down")
        XCTAssertLessThanOrEqual(probes, 6, "one probe per cool-down for the host, not one per endpoint (10 endpoints)")
        XCTAssertEqual(
            try count("SELECT count(*) FROM courier.endpoint_health WHERE host = $1 AND opened_at IS NOT NULL", [host]), 0,
            "refused connections are the host's fault, not its endpoints'")
    }

    func testAnOrderedEndpointGetsItsMessagesInPublishOrderOneAtATime() async throws {
        let ordered = OrderedReceiver(failing: 9, times: 2)
        let log = self.log
        let sink = try await HTTPSink.start { request in
            if request.path == "/ordered" { return await ordered.receive(request) }
            log.begin("unordered")
            try? await Task.sleep(nanoseconds: 5_000_000)
            log.end("unordered")
            _ = log.record(request, key: "unordered")
            return .respond(status: 204)
        }
        sinks.append(sink)
        try probe.connection.query(
            "INSERT INTO courier.queues (name, retry_schedule) VALUES ($1, '{0.2 seconds}')", [queue])
        for (path, isOrdered) in [("ordered", true), ("unordered", false)] {
            try probe.connection.query(
                "INSERT INTO courier.endpoints (tenant, url, event_types, queue, ordered) VALUES ('acme', $1, '{*}', $2, $3)",
                [sink.baseURL + "/" + path, queue, isOrdered])
        }
        let messages = 1000
        try probe.connection.transaction { connection in
            try connection.query(
                "SELECT courier.publish('order.placed', jsonb_build_object('n', g), 'acme') FROM generate_series(0, $1) g",
                [messages - 1])
        }
        _ = try startWorkerProcess()
        XCTAssertTrue(try waitFor(20) { log.counts["unordered"] == messages }, "the unordered endpoint got every message")
        let orderedWhenUnorderedWasDone = ordered.delivered
        XCTAssertTrue(try waitFor(120) { ordered.delivered == messages }, "delivered \(ordered.delivered) of \(messages)")
        XCTAssertEqual(ordered.problems, [], "the receiver saw every message in publish order, one at a time")
        XCTAssertEqual(ordered.failuresSent, 2, "the 10th failed twice and held the rest until it succeeded")
        XCTAssertLessThan(orderedWhenUnorderedWasDone, messages, "the unordered endpoint did not wait for the ordered one")
        XCTAssertGreaterThan(log.maxOverlap, 1, "the unordered endpoint got several at once")
    }

    func testAnEndpointFailingForTheWholeWindowIsDisabledItsSubscribersHearAndEnablingResumesIt() async throws {
        let down = SharedFlag(true)
        let events = SinkLog()
        let sink = try await HTTPSink.start { request in
            if request.path == "/ops" {
                _ = events.record(request, key: "ops")
                return .respond(status: 204)
            }
            return down.value ? .respond(status: 503) : .respond(status: 200)
        }
        sinks.append(sink)
        let host = URL(string: sink.baseURL)!.host!
        try setBreaker(host, threshold: 3, cooldown: .seconds(1))
        try probe.connection.query(
            "INSERT INTO courier.queues (name, retry_schedule, max_attempts) VALUES ($1, '{0.1 seconds}', 1000)", [queue])
        let endpoint = try probe.connection.query(
            """
            INSERT INTO courier.endpoints (tenant, url, event_types, queue, disable_after)
            VALUES ('acme', $1, '{*}', $2, interval '1 hour') RETURNING id
            """, [sink.baseURL + "/down", queue])[0].decode(0, as: Int64.self)
        try probe.connection.query(
            "INSERT INTO courier.endpoints (url, event_types, queue) VALUES ($1, '{courier.endpoint.*}', $2)",
            [sink.baseURL + "/ops", queue])
        for n in 0..<3 {
            try probe.connection.query("SELECT courier.publish('invoice.paid', jsonb_build_object('n', $1::int), 'acme')", [n])
        }
        _ = try startWorkerProcess()
        XCTAssertTrue(try waitFor(20) {
            try self.count(
                "SELECT count(*) FROM courier.endpoint_health WHERE endpoint_id = $1 AND failing_since IS NOT NULL", [endpoint]) == 1
        })
        // The window has passed (time injected): the next failure disables the endpoint.
        try probe.connection.query(
            "UPDATE courier.endpoint_health SET failing_since = now() - interval '2 hours' WHERE endpoint_id = $1", [endpoint])
        XCTAssertTrue(try waitFor(20) { events.counts["ops"] == 1 }, "the subscriber heard of it")
        let event = try XCTUnwrap(events.all.first)
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(event.body)) as? [String: Any])
        XCTAssertEqual(body["type"] as? String, "courier.endpoint.disabled")
        let data = try XCTUnwrap(body["data"] as? [String: Any])
        XCTAssertEqual((data["endpoint_id"] as? NSNumber)?.int64Value, endpoint)
        XCTAssertTrue((data["reason"] as? String ?? "").hasPrefix("every delivery failed for"), "\(data)")
        // Disabled: its deliveries wait, spending nothing.
        let waiting = "SELECT count(*) FROM courier.jobs WHERE endpoint_id = $1 AND state IN ('pending', 'retrying')"
        XCTAssertEqual(try count(waiting, [endpoint]), 3)
        let attempts = "SELECT count(*) FROM courier.attempts a JOIN courier.jobs j ON j.id = a.job_id WHERE j.endpoint_id = $1"
        try await Task.sleep(nanoseconds: 300_000_000)
        let settled = try count(attempts, [endpoint])
        try await Task.sleep(nanoseconds: 1_500_000_000)
        XCTAssertEqual(try count(attempts, [endpoint]), settled, "nothing is sent to a disabled endpoint")
        // The receiver is back; an operator enables the endpoint and its deliveries go.
        down.value = false
        let enabled = try CourierRunner.run(["endpoints", "enable", "\(endpoint)"], databaseURL: url)
        XCTAssertEqual(enabled.status, 0, enabled.stderr)
        XCTAssertTrue(try waitFor(20) {
            try self.count("SELECT count(*) FROM courier.jobs WHERE endpoint_id = $1 AND state = 'succeeded'", [endpoint]) == 3
        })
    }
}

/// The ordered endpoint's receiver: every request must carry the next message in publish
/// order (the same one again after a failure), and no two may overlap.
private final class OrderedReceiver: @unchecked Sendable {
    private let lock = NSLock()
    private let failing: Int
    private var failuresLeft: Int
    private var next = 0
    private var inFlight = 0
    private(set) var failuresSent = 0
    private var seenProblems: [String] = []

    init(failing: Int, times: Int) {
        self.failing = failing
        failuresLeft = times
    }

    var delivered: Int { lock.withLock { next } }
    var problems: [String] { lock.withLock { seenProblems } }

    func receive(_ request: SinkRequest) async -> SinkResponse {
        lock.withLock {
            inFlight += 1
            if inFlight > 1 { seenProblems.append("two requests at once") }
        }
        // Held a moment, so a second request sent before this answer would overlap it.
        try? await Task.sleep(nanoseconds: 1_000_000)
        return lock.withLock {
            defer { inFlight -= 1 }
            guard let body = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
                let data = body["data"] as? [String: Any], let n = (data["n"] as? NSNumber)?.intValue
            else {
                seenProblems.append("unreadable body")
                return .respond(status: 400)
            }
            guard n == next else {
                seenProblems.append("got \(n), expected \(next)")
                return .respond(status: 409)
            }
            if n == failing && failuresLeft > 0 {
                failuresLeft -= 1
                failuresSent += 1
                return .respond(status: 500)
            }
            next += 1
            return .respond(status: 204)
        }
    }
}
