import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Destinations in the database: the claim's cluster-wide caps and fairness, the running count
/// every path keeps, the breaker, rate limits, 410 and 429 outcomes.
final class DestinationTests: XCTestCase {
    private var connection: PostgresConnection!
    private var other: PostgresConnection!
    private var queue: String!
    /// A host name of this test alone (destination rows are shared by every queue).
    private var tag: String!

    override func setUpWithError() throws {
        let url = try TestDatabase.shared(label: "destinations")
        connection = try PostgresConnection(url)
        other = try PostgresConnection(url)
        queue = "q\(UInt32.random(in: 0...UInt32.max))"
        tag = "t\(UInt32.random(in: 0...UInt32.max))"
    }

    override func tearDown() {
        connection?.close()
        other?.close()
    }

    private func host(_ name: String) -> String { "\(name).\(tag!).test" }

    @discardableResult
    private func enqueue(
        _ count: Int, host name: String, maxAttempts: Int = 5, delay: Double = 0, priority: Int = 0
    ) throws -> [Int64] {
        try (0..<count).map { i in
            try connection.query(
                """
                SELECT courier.enqueue(url => $1, payload => '{}', queue => $2, max_attempts => $3,
                                       run_at => now() + $4::float8 * interval '1 second', priority => $5)
                """,
                ["https://\(host(name)):8443/\(i)", queue, maxAttempts, delay, priority])[0].decode(0, as: Int64.self)
        }
    }

    private func running(_ name: String) throws -> Int {
        try connection.query(
            "SELECT count(*) FROM courier.jobs WHERE host = $1 AND state = 'running'", [host(name)])[0].decode(0)
    }

    func testHostIsDerivedByTheDatabase() throws {
        let id = try enqueue(1, host: "Mixed")[0]
        XCTAssertEqual(
            try connection.query("SELECT host FROM courier.jobs WHERE id = $1", [id])[0].decode(0, as: String.self),
            host("mixed"))
        XCTAssertEqual(
            try connection.query("SELECT courier.url_host('http://[2001:DB8::1]:80/x')")[0].decode(0, as: String.self),
            "[2001:db8::1]")
    }

    func testCapHoldsAcrossWorkersAndAnOutcomeFreesRoom() throws {
        try enqueue(10, host: "a")
        let first = JobStore(connection: connection, workerID: "w1")
        let second = JobStore(connection: other, workerID: "w2")
        let claimedByFirst = try first.claimBatch(queues: [queue], limit: 10, lease: .seconds(60), perHostLimit: 3)
        XCTAssertEqual(claimedByFirst.jobs.count, 3)
        XCTAssertTrue(claimedByFirst.heldBack, "the host is now at its cap")
        let claimedBySecond = try second.claimBatch(queues: [queue], limit: 10, lease: .seconds(60), perHostLimit: 3)
        XCTAssertEqual(claimedBySecond.jobs.count, 0, "another worker may not pass the cap")
        XCTAssertTrue(claimedBySecond.heldBack)
        XCTAssertEqual(try running("a"), 3)
        try first.record([claimedByFirst.jobs[0]], .delivered(status: 200))
        XCTAssertEqual(try running("a"), 2)
        XCTAssertEqual(
            try second.claimBatch(queues: [queue], limit: 10, lease: .seconds(60), perHostLimit: 3).jobs.count, 1)
        // A host's own cap wins over the workers' default.
        try connection.query("UPDATE courier.destinations SET max_in_flight = 5 WHERE host = $1", [host("a")])
        XCTAssertEqual(
            try second.claimBatch(queues: [queue], limit: 10, lease: .seconds(60), perHostLimit: 3).jobs.count, 2)
    }

    func testConcurrentClaimersNeverPassTheCap() throws {
        try enqueue(200, host: "busy")
        let url = try TestDatabase.shared(label: "destinations")
        let queue = self.queue!
        let failures = UncheckedList()
        let group = DispatchGroup()
        let claimedTotal = UncheckedList()
        for index in 0..<4 {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    let connection = try PostgresConnection(url)
                    defer { connection.close() }
                    let store = JobStore(connection: connection, workerID: "c\(index)")
                    for _ in 0..<20 {
                        let jobs = try store.claim(queues: [queue], limit: 5, lease: .seconds(60), perHostLimit: 7)
                        claimedTotal.append("\(jobs.count)")
                    }
                } catch {
                    failures.append("\(error)")
                }
            }.start()
        }
        group.wait()
        XCTAssertEqual(failures.items, [])
        XCTAssertEqual(claimedTotal.items.compactMap(Int.init).reduce(0, +), 7)
        XCTAssertEqual(try running("busy"), 7)
        XCTAssertEqual(
            try connection.query(
                "SELECT count(*) FROM courier.jobs WHERE queue = $1 AND state = 'running'", [queue]
            )[0].decode(0, as: Int.self), 7)
    }

    func testABacklogForOneHostDoesNotDelayAnotherHost() throws {
        try enqueue(500, host: "backlog")
        let lone = try enqueue(1, host: "lone")[0]
        let store = JobStore(connection: connection, workerID: "w1")
        let claimed = try store.claim(queues: [queue], limit: 10, lease: .seconds(60), perHostLimit: 100)
        XCTAssertEqual(claimed.count, 10)
        XCTAssertTrue(claimed.contains { $0.id == lone }, "the other host's job is in the first claim")
    }

    /// With more hosts waiting than a claim takes, each claim goes on from the lane where the
    /// previous one ended and wraps past the last host to the first: every host has its turn
    /// within (hosts / limit) claims, whichever host's jobs are older.
    func testClaimsGoRoundTheHostsFromWhereTheLastOneEnded() throws {
        for name in ["e", "d", "c", "b", "a"] { try enqueue(2, host: name) }
        let store = JobStore(connection: connection, workerID: "w1")
        var cursor: WorkerStatements.Lane?
        var rounds: [Set<String>] = []
        for _ in 0..<6 {
            let claim = try store.claimBatch(
                queues: [queue], limit: 2, lease: .seconds(60), perHostLimit: 100, after: cursor)
            rounds.append(Set(claim.jobs.map(\.host)))
            cursor = claim.cursor
        }
        let expected: [Set<String>] = [["a", "b"], ["c", "d"], ["e", "a"], ["b", "c"], ["d", "e"], []]
        XCTAssertEqual(rounds, expected.map { Set($0.map(host)) })
        XCTAssertNil(cursor, "a claim that found no lane starts the next round from the first")
    }

    /// Without a cursor, or with one past every lane, a claim starts at the first lane: a
    /// cursor left by hosts that are gone never hides the ones that are left.
    func testAClaimWhoseCursorIsPastEveryLaneStartsAtTheFirst() throws {
        try enqueue(1, host: "a")
        try enqueue(1, host: "b")
        let store = JobStore(connection: connection, workerID: "w1")
        let claim = try store.claimBatch(
            queues: [queue], limit: 1, lease: .seconds(60), perHostLimit: 100,
            after: .init(host: host("z"), queue: queue))
        XCTAssertEqual(claim.jobs.map(\.host), [host("a")])
        XCTAssertEqual(claim.cursor, .init(host: host("a"), queue: queue))
    }

    func testWithinOneHostJobsStartInRunAtOrder() throws {
        // Enqueued in reverse time order: run_at, not id, decides.
        var expected: [Int64] = []
        for offset in stride(from: -1.0, through: -30.0, by: -1.0).reversed() {
            expected.append(try enqueue(1, host: "ordered", delay: offset)[0])
        }
        let store = JobStore(connection: connection, workerID: "w1")
        var started: [Int64] = []
        while true {
            let jobs = try store.claim(queues: [queue], limit: 4, lease: .seconds(60), perHostLimit: 100)
            if jobs.isEmpty { break }
            started += jobs.map(\.id)
        }
        XCTAssertEqual(started, expected)
    }

    /// One claim's jobs come out in claim order: every host's first job, then every host's
    /// second, ...; within a turn by priority, then run_at, then id. The server returns them
    /// unordered with their places, and the store puts them in order.
    func testOneClaimsJobsComeOutHostByHostInPriorityOrder() throws {
        let a = try enqueue(3, host: "a", priority: 1)
        let b = try enqueue(2, host: "b", priority: 0)
        let order = [b[0], a[0], b[1], a[1], a[2]]

        // The statement alone: each job's place, whatever order the rows come in.
        try connection.simpleQuery("BEGIN")
        let lanes = try connection.run(WorkerStatements.lockDestinations, .init(queues: [queue], limit: 10, after: nil))
            .rows.map { WorkerStatements.Lane(host: try $0.decode(0), queue: try $0.decode(1)) }
        let result = try connection.run(
            WorkerStatements.claimBatch,
            .init(queues: [queue], workerID: "w0", limit: 10, lease: .seconds(60), defaultHostCap: 100, lanes: lanes))
        let place = result.columns.count - 2
        var places: [Int64: Int64] = [:]
        for row in result.rows { places[try row.decode(0)] = try row.decode(place) }
        try connection.simpleQuery("ROLLBACK")
        XCTAssertEqual(places, Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, Int64($0 + 1)) }))

        let store = JobStore(connection: connection, workerID: "w1")
        let claimed = try store.claim(queues: [queue], limit: 10, lease: .seconds(60), perHostLimit: 100)
        XCTAssertEqual(claimed.map(\.id), order)
    }

    func testAHostWhoseFirstJobWaitsForLaterStillGivesItsDueOnes() throws {
        // The lane's first job in claim order (priority 0) is not due; the due one (priority 1)
        // behind it is the host's head, and the host's place among hosts follows it.
        let later = try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2, priority => 0, run_at => now() + interval '1 hour')",
            ["https://\(host("waiting")):8443/later", queue])[0].decode(0, as: Int64.self)
        let due = try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2, priority => 1)",
            ["https://\(host("waiting")):8443/due", queue])[0].decode(0, as: Int64.self)
        let other = try enqueue(1, host: "other")[0]
        let store = JobStore(connection: connection, workerID: "w1")
        let claimed = try store.claim(queues: [queue], limit: 10, lease: .seconds(60))
        XCTAssertEqual(Set(claimed.map(\.id)), [due, other])
        XCTAssertFalse(claimed.map(\.id).contains(later))
    }

    func testEveryPathOutOfRunningFreesRoomAtTheHost() throws {
        try enqueue(12, host: "paths", maxAttempts: 1)
        let store = JobStore(connection: connection, workerID: "w1")
        func claim() throws -> [ClaimedJob] {
            try store.claim(queues: [queue], limit: 12, lease: .seconds(60), perHostLimit: 6)
        }
        let jobs = try claim()
        XCTAssertEqual(jobs.count, 6)
        XCTAssertEqual(try claim().count, 0, "at the cap")
        // A give-back, an outcome, a rescue, an operator's cancel, a DELETE, a hand-written
        // UPDATE: each frees exactly one slot.
        try store.release([(jobs[0].id, jobs[0].attempt)], delay: .seconds(60))
        XCTAssertEqual(try claim().count, 1)
        try store.record([jobs[1]], .response(status: 500, error: "HTTP 500"))
        XCTAssertEqual(try claim().count, 1)
        try connection.query(
            "UPDATE courier.jobs SET locked_until = now() - interval '1 second' WHERE id = $1", [jobs[2].id])
        _ = try store.maintain(keepingSucceeded: .seconds(86_400), lease: .milliseconds(1))
        XCTAssertEqual(try claim().count, 1)
        try connection.query(
            """
            UPDATE courier.jobs SET state = 'cancelled', finished_at = now(), locked_by = NULL, locked_until = NULL
            WHERE id = $1
            """, [jobs[3].id])
        XCTAssertEqual(try claim().count, 1)
        try connection.query("DELETE FROM courier.jobs WHERE id = $1", [jobs[4].id])
        XCTAssertEqual(try claim().count, 1)
        XCTAssertEqual(try running("paths"), 6)
        XCTAssertEqual(try claim().count, 0)
    }

    func testDisabledHostIsNotClaimedAndEnablingResumes() throws {
        try enqueue(3, host: "off")
        let admin = DestinationStore(connection: connection)
        try admin.disable(host("off"), reason: "maintenance")
        let store = JobStore(connection: connection, workerID: "w1")
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(60)).count, 0)
        let listed = try XCTUnwrap(try admin.list(host: host("off"), limit: 5, defaultMaxInFlight: 100).first)
        XCTAssertEqual(listed.due, 3, "parked jobs stay due and visible")
        XCTAssertEqual(listed.disabledReason, "maintenance")
        XCTAssertTrue(try admin.enable(host("off")))
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(60)).count, 3)
        XCTAssertFalse(try admin.enable(host("never-seen")))
    }

    func testBreakerOpensThenOneProbeClosesIt() throws {
        try enqueue(10, host: "flaky")
        try DestinationStore(connection: connection).update(host("flaky"), {
            var change = DestinationSettingsChange()
            change.breakerThreshold = 3
            change.breakerCooldown = .seconds(60)
            return change
        }())
        let store = JobStore(connection: connection, workerID: "w1")
        let first = try store.claim(queues: [queue], limit: 3, lease: .seconds(60))
        XCTAssertEqual(first.count, 3)
        // Refused connections are the host's fault (a 5xx is its endpoint's: EndpointHealthTests).
        try store.record(first, .failure(.transport(.connectRefused), error: "connection refused"))
        let state = try connection.query(
            "SELECT failure_streak, opened_at IS NOT NULL, probe_at > now() + interval '50 seconds' FROM courier.destinations WHERE host = $1",
            [host("flaky")])[0]
        XCTAssertEqual(try state.decode(0, as: Int.self), 3)
        XCTAssertEqual(try state.decode(1, as: Bool.self), true)
        XCTAssertEqual(try state.decode(2, as: Bool.self), true)
        // Open: nothing is claimed, and the waiting jobs spend no attempt.
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(60)).count, 0)
        // The cool-down is over: exactly one probe goes, even with room for more.
        try connection.query("UPDATE courier.destinations SET probe_at = now() WHERE host = $1", [host("flaky")])
        let probe = try store.claim(queues: [queue], limit: 10, lease: .seconds(60))
        XCTAssertEqual(probe.count, 1)
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(60)).count, 0)
        try store.record(probe, .delivered(status: 200))
        XCTAssertEqual(
            try connection.query(
                "SELECT failure_streak, opened_at IS NULL FROM courier.destinations WHERE host = $1", [host("flaky")]
            )[0].decode(1, as: Bool.self), true)
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(60)).count, 6)
        XCTAssertEqual(
            try connection.query(
                "SELECT count(*) FROM courier.jobs WHERE queue = $1 AND attempt = 0", [queue])[0].decode(0, as: Int.self),
            0)
    }

    func testRateLimitStartsAtMostItsRatePerSecond() throws {
        try enqueue(20, host: "slow")
        var change = DestinationSettingsChange()
        change.rateLimit = .some(5)
        try DestinationStore(connection: connection).update(host("slow"), change)
        let store = JobStore(connection: connection, workerID: "w1")
        // A full bucket: a second's worth starts at once, which empties it at that claim's now().
        XCTAssertEqual(try store.claim(queues: [queue], limit: 20, lease: .seconds(60)).count, 5)
        let emptied = try connection.query(
            "SELECT tokens, tokens_at::text FROM courier.destinations WHERE host = $1", [host("slow")])[0]
        XCTAssertEqual(try emptied.decode(0, as: Double.self), 0)
        let emptiedAt: String = try emptied.decode(1)
        // Right after, only what refilled since can start: nothing, unless this machine stalled
        // for 0.2 s (the bound is the refill up to a statement that runs after the claim).
        let second = try store.claim(queues: [queue], limit: 20, lease: .seconds(60)).count
        let secondBound: Int = try connection.query(
            "SELECT floor(least(5, 5 * extract(epoch FROM now() - $1::timestamptz)::float8))::int", [emptiedAt]
        )[0].decode(0)
        XCTAssertLessThanOrEqual(second, secondBound)
        // 0.45 s pass on the bucket's clock, not the test's: an empty bucket filled 450 ms ago.
        let filledAt: String = try connection.query(
            """
            UPDATE courier.destinations SET tokens = 0, tokens_at = now() - interval '450 milliseconds'
            WHERE host = $1 RETURNING tokens_at::text
            """, [host("slow")])[0].decode(0)
        let claimed = try store.claim(queues: [queue], limit: 20, lease: .seconds(60)).count
        // The claim refilled the bucket at 5 a second from then to its own now() (which it
        // recorded), at most a second's worth, started one job per whole token, kept the rest.
        let bucket = try connection.query(
            """
            SELECT least(5, 5 * extract(epoch FROM tokens_at - $2::timestamptz)::float8), tokens
            FROM courier.destinations WHERE host = $1
            """, [host("slow"), filledAt])[0]
        let refill = try bucket.decode(0, as: Double.self)
        XCTAssertGreaterThanOrEqual(refill, 2.25, "the claim saw at least the 0.45 s")
        XCTAssertEqual(claimed, Int(refill.rounded(.down)), "refill \(refill)")
        XCTAssertEqual(try bucket.decode(1, as: Double.self), refill - Double(claimed), accuracy: 1e-9)
    }

    func testTooManyRequestsPostponesWithoutSpendingAnAttempt() throws {
        let id = try enqueue(1, host: "busy429", maxAttempts: 1)[0]
        let store = JobStore(connection: connection, workerID: "w1")
        let jobs = try store.claim(queues: [queue], limit: 1, lease: .seconds(60))
        try store.record(jobs, .response(status: 429, error: "HTTP 429", retryAfter: .seconds(30)))
        let row = try connection.query(
            """
            SELECT state::text, attempt, postponements, run_at > now() + interval '25 seconds',
                   (SELECT count(*) FROM courier.attempts WHERE job_id = $1)
            FROM courier.jobs WHERE id = $1
            """, [id])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "pending", "its only attempt is not spent")
        XCTAssertEqual(try row.decode(1, as: Int.self), 0)
        XCTAssertEqual(try row.decode(2, as: Int.self), 1)
        XCTAssertEqual(try row.decode(3, as: Bool.self), true)
        XCTAssertEqual(try row.decode(4, as: Int.self), 1, "the request still leaves an attempt row")
        XCTAssertEqual(
            try connection.query("SELECT failure_streak FROM courier.destinations WHERE host = $1", [host("busy429")])[0]
                .decode(0, as: Int.self), 0, "429 is not a failure of the receiver")
    }

    /// One claim over two queues and two hosts: each job carries its own queue's settings
    /// (signing secret, in-flight cap, OAuth client, schedule) and its own host's 410 rule,
    /// and a queue with no row of its own carries none.
    func testAClaimGivesEachJobItsOwnQueuesAndHostsSettings() throws {
        let signed = queue + "s", bare = queue + "b"
        try connection.query(
            """
            INSERT INTO courier.queues (name, signing_secret, max_in_flight, retry_schedule, oauth_token_url,
                                        oauth_client_id, oauth_client_secret, oauth_scope)
            VALUES ($1, 'whsec_c2VjcmV0', 7, '{2s}', 'https://token.example/t', 'client', 'hidden', 'send')
            """, [signed])
        var change = DestinationSettingsChange()
        change.disableOnGone = false
        try DestinationStore(connection: connection).update(host("keeps"), change)
        var ids: [String: Int64] = [:]
        for (name, queueName) in [("keeps", signed), ("keeps", bare), ("parks", signed), ("parks", bare)] {
            ids["\(name)/\(queueName)"] = try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2)",
                ["https://\(host(name))/hook", queueName])[0].decode(0, as: Int64.self)
        }
        let store = JobStore(connection: connection, workerID: "w1")
        let claimed = try store.claim(queues: [signed, bare], limit: 10, lease: .seconds(60))
        XCTAssertEqual(Set(claimed.map(\.id)), Set(ids.values), "one claim takes all four")
        for job in claimed {
            let isSigned = job.queue == signed
            let keeps = job.host == host("keeps")
            XCTAssertEqual(ids["\(keeps ? "keeps" : "parks")/\(job.queue)"], job.id)
            XCTAssertEqual(job.signingSecret, isSigned ? "whsec_c2VjcmV0" : nil, "\(job.id)")
            XCTAssertEqual(job.queueMaxInFlight, isSigned ? 7 : nil, "\(job.id)")
            XCTAssertEqual(job.schedule.delays, isSigned ? [.seconds(2)] : RetrySchedule.standardWebhooks.delays)
            XCTAssertEqual(job.oauth?.clientID, isSigned ? "client" : nil, "\(job.id)")
            XCTAssertEqual(job.oauth?.scope, isSigned ? "send" : nil, "\(job.id)")
            XCTAssertEqual(job.parkOnGone, !keeps, "\(job.id) at \(job.host)")
        }
    }

    func testGoneOnASharedHostEndsOnlyThatJob() throws {
        let ids = try enqueue(2, host: "shared")
        var change = DestinationSettingsChange()
        change.disableOnGone = false
        try DestinationStore(connection: connection).update(host("shared"), change)
        let store = JobStore(connection: connection, workerID: "w1")
        let jobs = try store.claim(queues: [queue], limit: 1, lease: .seconds(60))
        XCTAssertEqual(jobs.first?.parkOnGone, false)
        try store.record(jobs, .response(status: 410, error: "HTTP 410 Gone"))
        XCTAssertEqual(
            try connection.query("SELECT state::text FROM courier.jobs WHERE id = $1", [ids[0]])[0].decode(0, as: String.self),
            "dead")
        XCTAssertEqual(
            try connection.query("SELECT disabled_at IS NULL FROM courier.destinations WHERE host = $1", [host("shared")])[0]
                .decode(0, as: Bool.self), true)
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(60)).map(\.id), [ids[1]])
    }

    func testGoneDisablesTheHostAndParksItsJobs() throws {
        let ids = try enqueue(3, host: "gone")
        let store = JobStore(connection: connection, workerID: "w1")
        let jobs = try store.claim(queues: [queue], limit: 1, lease: .seconds(60))
        try store.record(jobs, .response(status: 410, error: "HTTP 410 Gone"))
        let destination = try connection.query(
            "SELECT disabled_at IS NOT NULL, disabled_reason FROM courier.destinations WHERE host = $1", [host("gone")])[0]
        XCTAssertEqual(try destination.decode(0, as: Bool.self), true)
        XCTAssertEqual(try destination.decode(1, as: String.self), "the receiver answered 410 Gone to job \(jobs[0].id)")
        let states = try connection.query(
            "SELECT state::text, attempt FROM courier.jobs WHERE id = ANY ($1) ORDER BY id", [PostgresArray(ids)]
        ).rows.map { "\(try $0.decode(0, as: String.self)):\(try $0.decode(1, as: Int.self))" }
        XCTAssertEqual(states, ["pending:0", "pending:0", "pending:0"], "parked, nothing dropped, no attempt spent")
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(60)).count, 0)
        XCTAssertTrue(try DestinationStore(connection: connection).enable(host("gone")))
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(60)).count, 3)
    }
}

/// A list several threads append to.
private final class UncheckedList: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String] = []
    func append(_ value: String) { lock.withLock { values.append(value) } }
    var items: [String] { lock.withLock { values } }
}
