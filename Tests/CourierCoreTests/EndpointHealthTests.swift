import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Endpoint health in the database (migration 0014): an endpoint's own breaker and gate beside
/// its host's, ordered endpoints, disabled endpoints, auto-disable and the operational events.
final class EndpointHealthTests: XCTestCase {
    private var connection: PostgresConnection!
    private var queue: String!
    /// A tag of this test alone: host names and tenants are shared by every test of the database.
    private var tag: String!

    override func setUpWithError() throws {
        connection = try PostgresConnection(try TestDatabase.shared(label: "endpointhealth"))
        queue = "q\(UInt32.random(in: 0...UInt32.max))"
        tag = "t\(UInt32.random(in: 0...UInt32.max))"
    }

    override func tearDown() {
        connection?.close()
    }

    private var host: String { "shared.\(tag!).test" }

    private func breaker(threshold: Int, cooldown: Duration = .seconds(60)) throws {
        var change = DestinationSettingsChange()
        change.breakerThreshold = threshold
        change.breakerCooldown = cooldown
        try DestinationStore(connection: connection).update(host, change)
    }

    @discardableResult
    private func enqueue(_ count: Int, path: String, maxAttempts: Int = 5) throws -> [Int64] {
        try (0..<count).map { i in
            try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2, max_attempts => $3)",
                ["https://\(host)/\(path)?n=\(i)", queue, maxAttempts])[0].decode(0, as: Int64.self)
        }
    }

    private func claim(_ store: JobStore, limit: Int = 100) throws -> [ClaimedJob] {
        try store.claim(queues: [queue], limit: limit, lease: .seconds(60))
    }

    private func health(_ key: String) throws -> (streak: Int, open: Bool, disabled: Bool)? {
        guard let row = try connection.query(
            "SELECT failure_streak, opened_at IS NOT NULL, disabled FROM courier.endpoint_health WHERE key = $1", [key]
        ).rows.first else { return nil }
        return (try row.decode(0), try row.decode(1), try row.decode(2))
    }

    private func hostOpen() throws -> Bool {
        try connection.query(
            "SELECT coalesce(bool_or(opened_at IS NOT NULL), false) FROM courier.destinations WHERE host = $1", [host]
        )[0].decode(0)
    }

    @discardableResult
    private func addEndpoint(path: String, ordered: Bool = false) throws -> Int64 {
        try connection.query(
            """
            INSERT INTO courier.endpoints (tenant, url, event_types, queue, ordered)
            VALUES ($1, $2, '{*}', $3, $4) RETURNING id
            """, [tag, "https://\(host)/\(path)", queue, ordered])[0].decode(0)
    }

    @discardableResult
    private func publish(_ count: Int, type: String = "invoice.paid") throws -> [Int64] {
        try (0..<count).map { i in
            try connection.query(
                "SELECT courier.publish($1, jsonb_build_object('n', $2::int), $3)", [type, i, tag]
            )[0].decode(0, as: Int64.self)
        }
    }

    private func operationalMessages(_ type: String) throws -> [[String: Any]] {
        try connection.query(
            "SELECT payload::text FROM courier.messages WHERE event_type = $1 AND tenant IS NULL ORDER BY id", [type]
        ).rows.map { row in
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try row.decode(0, as: String.self).utf8)) as? [String: Any])
        }
    }

    // MARK: What a claimed job carries

    /// The claim reads each lane's queue and destination once and hands their settings to every
    /// job of the lane, and to a gate's probe beside them: the queue's signing secret, cap,
    /// retry schedule and OAuth2 client, the host's rule for a 410. A job of a queue without
    /// settings gets none, not its neighbour's.
    func testEveryClaimedJobCarriesItsOwnQueuesSettingsWhetherFromALaneOrAGate() throws {
        let plainQueue = "p\(UInt32.random(in: 0...UInt32.max))"
        try connection.query(
            """
            INSERT INTO courier.queues (name, signing_secret, max_in_flight, retry_schedule, oauth_token_url,
                                        oauth_client_id, oauth_client_secret, oauth_scope, oauth_audience)
            VALUES ($1, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 7, '{2s,9s}', 'https://auth.test/token',
                    'client-1', 'client-secret-1', 'send', 'receivers')
            """, [queue])
        try breaker(threshold: 3)
        let store = JobStore(connection: connection, workerID: "w1")
        try enqueue(3, path: "hang")
        try store.record(try claim(store), .failure(.transport(.readTimeout), error: "no complete response in time"))
        let key = "https://\(host)/hang"
        XCTAssertEqual(try health(key)?.open, true)
        try enqueue(2, path: "hang")
        XCTAssertGreaterThan(try connection.run(WorkerStatements.sweepGates)[0].decode(0, as: Int.self), 0)
        try connection.query("UPDATE courier.endpoint_health SET probe_at = now() WHERE key = $1", [key])
        try connection.query("UPDATE courier.jobs SET run_at = now() WHERE queue = $1 AND state = 'retrying'", [queue])
        let lane = try enqueue(2, path: "ok")
        let plain = try (0..<2).map { i in
            try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2)",
                ["https://\(host)/plain?n=\(i)", plainQueue])[0].decode(0, as: Int64.self)
        }

        let claimed = try store.claim(queues: [queue, plainQueue], limit: 100, lease: .seconds(60))
        let probe = try XCTUnwrap(claimed.first { $0.url.contains("/hang") }, "the gate gave its probe")
        XCTAssertEqual(claimed.filter { $0.url.contains("/hang") }.count, 1)
        XCTAssertEqual(Set(claimed.map(\.id)).intersection(lane + plain).count, 4)
        for job in claimed {
            if job.queue == queue {
                XCTAssertEqual(job.signingSecret, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "job \(job.url)")
                XCTAssertEqual(job.queueMaxInFlight, 7, "job \(job.url)")
                XCTAssertEqual(job.schedule.delays, [.seconds(2), .seconds(9)], "job \(job.url)")
                XCTAssertEqual(job.oauth?.tokenURL, "https://auth.test/token", "job \(job.url)")
                XCTAssertEqual(job.oauth?.clientID, "client-1", "job \(job.url)")
                XCTAssertEqual(job.oauth?.clientSecret, "client-secret-1", "job \(job.url)")
                XCTAssertEqual(job.oauth?.scope, "send", "job \(job.url)")
                XCTAssertEqual(job.oauth?.audience, "receivers", "job \(job.url)")
            } else {
                XCTAssertEqual(job.queue, plainQueue)
                XCTAssertNil(job.signingSecret, "job \(job.url)")
                XCTAssertNil(job.queueMaxInFlight, "job \(job.url)")
                XCTAssertEqual(job.schedule, .standardWebhooks, "job \(job.url)")
                XCTAssertNil(job.oauth, "job \(job.url)")
            }
            XCTAssertTrue(job.parkOnGone, "the host disables itself on a 410 (its default): job \(job.url)")
        }
        XCTAssertEqual(probe.queue, queue)

        // The host's rule changed: the next claim reads it again.
        try store.record(claimed, .delivered())
        try connection.query("UPDATE courier.destinations SET disable_on_gone = false WHERE host = $1", [host])
        try enqueue(1, path: "ok")
        let next = try claim(store)
        XCTAssertFalse(next.isEmpty)
        XCTAssertTrue(next.allSatisfy { !$0.parkOnGone })
    }

    // MARK: Breakers

    func testAnEndpointsFailuresOpenItsOwnBreakerAndItsJobsLeaveTheLanes() throws {
        try breaker(threshold: 3)
        let store = JobStore(connection: connection, workerID: "w1")
        try enqueue(3, path: "hang")
        let first = try claim(store)
        XCTAssertEqual(first.count, 3)
        try store.record(first, .failure(.transport(.readTimeout), error: "no complete response in time"))
        let key = "https://\(host)/hang"
        XCTAssertEqual(try health(key)?.streak, 3)
        XCTAssertEqual(try health(key)?.open, true, "the endpoint's breaker opened")
        XCTAssertFalse(try hostOpen(), "the host's did not: it answered")

        let later = try enqueue(5, path: "hang")
        let healthy = try enqueue(5, path: "ok")
        // The three that failed came back into the lanes before the gate closed; the claim
        // leaves them (and the new ones) where they are and takes every healthy job.
        let second = try claim(store)
        XCTAssertEqual(Set(second.map(\.id)), Set(healthy))
        XCTAssertGreaterThan(try connection.run(WorkerStatements.sweepGates)[0].decode(0, as: Int.self), 0)
        XCTAssertEqual(
            try connection.query(
                "SELECT count(*) FROM courier.jobs WHERE queue = $1 AND gate = $2 AND state IN ('pending', 'retrying')",
                [queue, key])[0].decode(0, as: Int.self),
            8, "every waiting job of the endpoint is in its gate")
        try store.record(second, .delivered())

        // Half-open: exactly one probe, from the failing endpoint's own gate.
        try connection.query("UPDATE courier.endpoint_health SET probe_at = now() WHERE key = $1", [key])
        try connection.query("UPDATE courier.jobs SET run_at = now() WHERE queue = $1 AND state = 'retrying'", [queue])
        try enqueue(2, path: "ok")
        let third = try claim(store)
        XCTAssertEqual(third.filter { $0.url.contains("/hang") }.count, 1, "one probe")
        XCTAssertEqual(third.filter { $0.url.contains("/ok") }.count, 2, "healthy jobs beside it")
        XCTAssertEqual(try claim(store).count, 0, "no second probe in the same cool-down")
        let probe = try XCTUnwrap(third.first { $0.url.contains("/hang") })
        try store.record(third.filter { $0.url.contains("/ok") }, .delivered())
        try store.record([probe], .delivered())
        XCTAssertEqual(try health(key)?.open, false, "the probe's answer closed it")
        let rest = try claim(store)
        XCTAssertEqual(rest.count, 7, "the gate opened: every other job of the endpoint is claimable")
        XCTAssertTrue(Set(rest.map(\.id)).isSuperset(of: later))
    }

    func testAHostThatRefusesEveryConnectionOpensOneHostBreakerWithOneProbePerCoolDown() throws {
        try breaker(threshold: 3)
        let store = JobStore(connection: connection, workerID: "w1")
        try enqueue(5, path: "a")
        try enqueue(5, path: "b")
        try enqueue(5, path: "c")
        let first = try claim(store, limit: 3)
        XCTAssertEqual(first.count, 3)
        try store.record(first, .failure(.transport(.connectRefused), error: "connection refused"))
        XCTAssertTrue(try hostOpen())
        for path in ["a", "b", "c"] {
            XCTAssertNotEqual(try health("https://\(host)/\(path)")?.open, true, "no endpoint breaker for a host fault")
        }
        XCTAssertEqual(try claim(store).count, 0)
        try connection.query("UPDATE courier.destinations SET probe_at = now() WHERE host = $1", [host])
        try connection.query("UPDATE courier.jobs SET run_at = now() WHERE queue = $1 AND state = 'retrying'", [queue])
        XCTAssertEqual(try claim(store).count, 1, "one probe for the host, not one per endpoint")
        XCTAssertEqual(try claim(store).count, 0)
    }

    // MARK: Ordered endpoints

    func testAnOrderedEndpointGetsOneDeliveryAtATimeInPublishOrderAndAFailureHoldsTheRest() throws {
        let ordered = try addEndpoint(path: "ordered", ordered: true)
        let unordered = try addEndpoint(path: "unordered")
        try publish(5)
        let store = JobStore(connection: connection, workerID: "w1")
        let orderedJobs = try connection.query(
            "SELECT job_id FROM courier.deliveries WHERE endpoint_id = $1 ORDER BY job_id", [ordered]
        ).rows.map { try $0.decode(0, as: Int64.self) }
        XCTAssertEqual(orderedJobs.count, 5)

        let first = try claim(store)
        XCTAssertEqual(first.filter { $0.endpointID == unordered }.count, 5, "the unordered endpoint gets all at once")
        XCTAssertEqual(first.filter { $0.endpointID == ordered }.map(\.id), [orderedJobs[0]])
        XCTAssertEqual(try claim(store).count, 0, "never two at once")
        try store.record(first.filter { $0.endpointID == unordered }, .delivered())
        XCTAssertEqual(try claim(store).count, 0)

        // The head fails: it is retried later and everything behind it waits for it.
        try store.record(first.filter { $0.endpointID == ordered }, .response(status: 500))
        XCTAssertEqual(try claim(store).count, 0, "the head is not due; nothing passes it")
        try connection.query("UPDATE courier.jobs SET run_at = now() WHERE id = $1", [orderedJobs[0]])
        let again = try claim(store)
        XCTAssertEqual(again.map(\.id), [orderedJobs[0]], "the same head again")
        try store.record(again, .delivered())
        // A re-send of the first message queues behind the others, in the same gate.
        let resent = try WebhookStore(connection: connection).resend(
            messageID: try connection.query("SELECT message_id FROM courier.jobs WHERE id = $1", [orderedJobs[0]])[0]
                .decode(0, as: Int64.self), endpointID: ordered)
        XCTAssertEqual(resent.count, 1)
        for expected in orderedJobs.dropFirst() + [resent[0].jobID] {
            let next = try claim(store)
            XCTAssertEqual(next.map(\.id), [expected])
            try store.record(next, .delivered())
        }
        XCTAssertEqual(try claim(store).count, 0)
    }

    // MARK: Disabled endpoints

    func testADisabledEndpointsJobsWaitAndEnablingResumesThem() throws {
        let endpoint = try addEndpoint(path: "paused")
        try publish(3)
        let webhooks = WebhookStore(connection: connection)
        XCTAssertTrue(try webhooks.disableEndpoint(endpoint, reason: "customer asked"))
        let store = JobStore(connection: connection, workerID: "w1")
        XCTAssertEqual(try claim(store).count, 0, "a disabled endpoint's deliveries wait")
        XCTAssertEqual(
            try connection.query(
                "SELECT count(*) FROM courier.jobs WHERE queue = $1 AND state = 'pending'", [queue])[0].decode(0, as: Int.self),
            3, "visible, waiting")
        let events = try operationalMessages("courier.endpoint.disabled").filter {
            ($0["endpoint_id"] as? NSNumber)?.int64Value == endpoint
        }
        XCTAssertEqual(events.count, 1)
        XCTAssertEqual(events.first?["reason"] as? String, "customer asked")
        XCTAssertEqual(events.first?["url"] as? String, "https://\(host)/paused")
        XCTAssertTrue(try webhooks.enableEndpoint(endpoint))
        XCTAssertEqual(try claim(store).count, 3, "enabled: its waiting deliveries go")
    }

    func testEveryDeliveryFailingForTheWindowDisablesTheEndpointWithTheReason() throws {
        let endpoint = try addEndpoint(path: "down")
        try connection.query("UPDATE courier.endpoints SET disable_after = interval '1 hour' WHERE id = $1", [endpoint])
        try publish(2)
        let store = JobStore(connection: connection, workerID: "w1")
        let first = try claim(store)
        XCTAssertEqual(first.count, 2)
        try store.record([first[0]], .response(status: 503))
        XCTAssertEqual(try health("endpoint:\(endpoint)")?.disabled, false, "one failure is not a window")
        // Time passes (injected): the first failure was two hours ago.
        try connection.query(
            "UPDATE courier.endpoint_health SET failing_since = now() - interval '2 hours' WHERE endpoint_id = $1", [endpoint])
        try store.record([first[1]], .response(status: 503))
        let row = try connection.query(
            "SELECT disabled_at IS NOT NULL, disabled_reason FROM courier.endpoints WHERE id = $1", [endpoint])[0]
        XCTAssertEqual(try row.decode(0, as: Bool.self), true)
        let reason = try row.decode(1, as: String.self)
        XCTAssertTrue(reason.hasPrefix("every delivery failed for 02:00"), reason)
        XCTAssertEqual(try health("endpoint:\(endpoint)")?.disabled, true)
        let event = try XCTUnwrap(operationalMessages("courier.endpoint.disabled").last {
            ($0["endpoint_id"] as? NSNumber)?.int64Value == endpoint
        })
        XCTAssertEqual(event["tenant"] as? String, tag)
        // Its retries wait in its gate, however due they are (the outcome that disabled it was
        // written as a retry, not moved to the dead letters as unwritable).
        XCTAssertEqual(
            try connection.query(
                "SELECT array_agg(state::text ORDER BY id), bool_and(gate IS NOT NULL) FROM courier.jobs WHERE queue = $1",
                [queue])[0].decode(0, as: String.self), "{retrying,retrying}")
        try connection.query("UPDATE courier.jobs SET run_at = now() WHERE queue = $1", [queue])
        XCTAssertEqual(try claim(store).count, 0)
    }

    func testDeadDeliveriesInARowDisableTheEndpointAndASuccessResetsTheCount() throws {
        let endpoint = try addEndpoint(path: "rejects")
        try connection.query("UPDATE courier.endpoints SET disable_after_dead = 3 WHERE id = $1", [endpoint])
        try publish(5)
        let store = JobStore(connection: connection, workerID: "w1")
        let jobs = try claim(store)
        XCTAssertEqual(jobs.count, 5)
        try store.record(Array(jobs[0..<2]), .response(status: 400))
        try store.record([jobs[2]], .delivered())
        try store.record([jobs[3]], .response(status: 400))
        XCTAssertEqual(
            try connection.query("SELECT dead_streak FROM courier.endpoint_health WHERE endpoint_id = $1", [endpoint])[0]
                .decode(0, as: Int.self), 1, "the success reset the count")
        XCTAssertNil(try connection.query("SELECT disabled_reason FROM courier.endpoints WHERE id = $1", [endpoint])[0]
            .decode(0, as: String?.self))
        try publish(2)
        let more = try claim(store)
        try store.record([jobs[4]] + more, .response(status: 400))
        XCTAssertEqual(
            try connection.query("SELECT disabled_reason FROM courier.endpoints WHERE id = $1", [endpoint])[0]
                .decode(0, as: String.self), "4 deliveries in a row went dead", "the batch of three after the one before")
    }

    func testAMessageWhoseEveryDeliveryDiedPublishesMessageFailedOnce() throws {
        try addEndpoint(path: "one")
        try addEndpoint(path: "two")
        let message = try publish(1)[0]
        let store = JobStore(connection: connection, workerID: "w1")
        let jobs = try claim(store)
        XCTAssertEqual(jobs.count, 2)
        try store.record([jobs[0]], .response(status: 404))
        func failures() throws -> [[String: Any]] {
            try operationalMessages("courier.message.failed").filter { ($0["message_id"] as? NSNumber)?.int64Value == message }
        }
        XCTAssertEqual(try failures().count, 0, "one delivery is still alive")
        try store.record([jobs[1]], .response(status: 404))
        let events = try failures()
        XCTAssertEqual(events.count, 1)
        XCTAssertEqual(events.first?["event_type"] as? String, "invoice.paid")
        XCTAssertEqual((events.first?["endpoints"] as? NSNumber)?.intValue, 2)
    }

    func testAGoneFromARegisteredEndpointDisablesTheEndpointNotItsHost() throws {
        let endpoint = try addEndpoint(path: "gone")
        try publish(2)
        let store = JobStore(connection: connection, workerID: "w1")
        let jobs = try claim(store, limit: 1)
        XCTAssertTrue(try XCTUnwrap(jobs.first).parkOnGone, "a delivery parks on 410")
        try store.record(jobs, .response(status: 410))
        XCTAssertEqual(
            try connection.query("SELECT disabled_reason FROM courier.endpoints WHERE id = $1", [endpoint])[0]
                .decode(0, as: String.self), "the receiver answered 410 Gone")
        XCTAssertEqual(
            try connection.query(
                "SELECT count(*) FROM courier.destinations WHERE host = $1 AND disabled_at IS NOT NULL", [host]
            )[0].decode(0, as: Int.self), 0, "the host carries on")
        XCTAssertEqual(try claim(store).count, 0, "both deliveries wait, parked")
    }

    func testADeliveryRunningWhenItsEndpointIsDeletedIsWrittenAndNotLeftInAGate() throws {
        let endpoint = try addEndpoint(path: "leaving", ordered: true)
        try publish(1)
        let store = JobStore(connection: connection, workerID: "w1")
        let running = try claim(store)
        XCTAssertEqual(running.count, 1)
        XCTAssertEqual(try WebhookStore(connection: connection).deleteEndpoint(endpoint), 0, "nothing waits; one runs")
        try store.record(running, .response(status: 503))
        XCTAssertEqual(
            try connection.query("SELECT state::text FROM courier.jobs WHERE id = $1", [running[0].id])[0]
                .decode(0, as: String.self), "retrying", "its outcome was written")
        _ = try connection.run(WorkerStatements.sweepGates)
        try connection.query("UPDATE courier.jobs SET run_at = now() WHERE id = $1", [running[0].id])
        XCTAssertEqual(try claim(store).map(\.id), [running[0].id], "its retry goes, as before endpoint health")
    }
}
