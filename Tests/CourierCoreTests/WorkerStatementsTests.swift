import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

final class WorkerStatementsTests: XCTestCase {
    private var connection: PostgresConnection!
    private var queue: String!

    override func setUpWithError() throws {
        connection = try PostgresConnection(try TestDatabase.shared(label: "workerstatements"))
        queue = "q\(UInt32.random(in: 0...UInt32.max))"
    }

    override func tearDown() {
        connection?.close()
    }

    func testEveryWorkerStatementPrepares() throws {
        let statements = [
            WorkerStatements.lockDestinations.sql, WorkerStatements.claimBatch.sql, WorkerStatements.completeBatch.sql,
            WorkerStatements.heartbeat.sql, WorkerStatements.loadBody.sql,
            WorkerStatements.release.sql, WorkerStatements.tryMaintenanceLock.sql, WorkerStatements.rescueExpired.sql,
            WorkerStatements.deleteExpiredFinished.sql,
        ]
        for (index, sql) in statements.enumerated() {
            XCTAssertNoThrow(try connection.prepare(name: "check_\(index)", sql: sql), sql)
        }
    }

    private func enqueue(_ count: Int, priority: Int = 0, maxAttempts: Int = 3) throws -> [Int64] {
        try (0..<count).map { i in
            try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2, priority => $3, max_attempts => $4)",
                ["http://127.0.0.1:9/\(i)", queue, priority, maxAttempts])[0].decode(0, as: Int64.self)
        }
    }

    private func state(_ id: Int64) throws -> String {
        try connection.query("SELECT state::text FROM courier.jobs WHERE id = $1", [id])[0].decode(0)
    }

    func testAClaimCarriesBodiesUpTo64KiBAndLeavesLargerOnesForLoadBody() throws {
        let sizes = [0, 10, Defaults.inlineBodyBytes, Defaults.inlineBodyBytes + 1, 1_048_576]
        var bodies: [Int64: [UInt8]] = [:]
        for size in sizes {
            let body = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size) }
            let id: Int64 = try connection.query(
                "SELECT courier.enqueue_raw(url => 'http://127.0.0.1:9/b', body => $1, queue => $2)",
                [size == 0 ? nil : body as [UInt8]?, queue])[0].decode(0)
            bodies[id] = size == 0 ? nil : body
        }
        let store = JobStore(connection: connection, workerID: "w-bodies")
        let claimed = try store.claim(queues: [queue], limit: 10, lease: .seconds(30))
        XCTAssertEqual(claimed.count, sizes.count)
        for job in claimed {
            let expected = bodies[job.id] ?? nil
            XCTAssertEqual(job.bodySize, expected?.count ?? 0)
            if job.bodySize > Defaults.inlineBodyBytes {
                XCTAssertNil(job.body, "a body over 64 KiB stays in PostgreSQL until loaded")
                XCTAssertTrue(job.bodyPending)
                XCTAssertEqual(try store.loadBody(of: job), expected)
            } else {
                XCTAssertEqual(job.body, expected)
                XCTAssertFalse(job.bodyPending)
            }
        }
        // Only the worker holding the attempt may read it: another worker, an older attempt or
        // a job no longer running gets nothing.
        let large = try XCTUnwrap(claimed.first { $0.bodyPending })
        XCTAssertNil(try JobStore(connection: connection, workerID: "w-other").loadBody(of: large))
        var older = large
        older.attempt -= 1
        XCTAssertNil(try store.loadBody(of: older))
        try connection.query("UPDATE courier.jobs SET state = 'pending', locked_by = NULL, locked_until = NULL WHERE id = $1", [large.id])
        XCTAssertNil(try store.loadBody(of: large))
    }

    func testClaimTakesDueJobsInPriorityOrderAndSetsTheLease() throws {
        let low = try enqueue(2, priority: 5)
        let high = try enqueue(1, priority: -1)
        let store = JobStore(connection: connection, workerID: "w1")
        let claimed = try store.claim(queues: [queue], limit: 2, lease: .seconds(30))
        XCTAssertEqual(claimed.map(\.id), [high[0], low[0]])
        XCTAssertEqual(claimed.map(\.attempt), [1, 1])
        XCTAssertEqual(claimed[0].schedule, .standardWebhooks)
        XCTAssertEqual(claimed[0].headers.map(\.0), ["Content-Type"])
        let row = try connection.query(
            "SELECT state::text, locked_by, locked_until > now() + interval '25 seconds' FROM courier.jobs WHERE id = $1",
            [high[0]])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "running")
        XCTAssertEqual(try row.decode(1, as: String.self), "w1")
        XCTAssertEqual(try row.decode(2, as: Bool.self), true)
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(30)).map(\.id), [low[1]])
    }

    func testClaimSkipsPausedQueuesAndFutureJobs() throws {
        _ = try enqueue(1)
        try connection.query("INSERT INTO courier.queues (name, paused) VALUES ($1, true)", [queue])
        let store = JobStore(connection: connection, workerID: "w1")
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(1)).count, 0)
        try connection.query("UPDATE courier.queues SET paused = false, retry_schedule = '{1s,2s}' WHERE name = $1", [queue])
        try connection.query("UPDATE courier.jobs SET run_at = now() + interval '1 hour' WHERE queue = $1", [queue])
        XCTAssertEqual(try store.claim(queues: [queue], limit: 10, lease: .seconds(1)).count, 0)
        try connection.query("UPDATE courier.jobs SET run_at = now() WHERE queue = $1", [queue])
        let claimed = try store.claim(queues: [queue], limit: 10, lease: .seconds(1))
        XCTAssertEqual(claimed.first?.schedule.delays, [.seconds(1), .seconds(2)])
    }

    /// The schedule a claim carries: the job's own over its queue's, the queue's over the
    /// default, and the default (`standardWebhooks`) when neither has one.
    func testAClaimCarriesTheJobsScheduleElseItsQueuesElseTheDefault() throws {
        func enqueue(schedule: String?) throws -> Int64 {
            try connection.query(
                "SELECT courier.enqueue(url => 'http://127.0.0.1:9/', payload => '{}', queue => $1, retry_schedule => $2::interval[])",
                [queue, schedule])[0].decode(0)
        }
        let plain = try enqueue(schedule: nil)
        let own = try enqueue(schedule: "{3s,4s,5s}")
        let store = JobStore(connection: connection, workerID: "w1")
        var schedules = Dictionary(
            uniqueKeysWithValues: try store.claim(queues: [queue], limit: 10, lease: .seconds(30)).map { ($0.id, $0.schedule) })
        XCTAssertEqual(schedules[plain], .standardWebhooks)
        XCTAssertEqual(schedules[own]?.delays, [.seconds(3), .seconds(4), .seconds(5)])

        try connection.query("INSERT INTO courier.queues (name, retry_schedule) VALUES ($1, '{1s,2s}')", [queue])
        let queued = try enqueue(schedule: nil)
        let ownBeside = try enqueue(schedule: "{7s}")
        schedules = Dictionary(
            uniqueKeysWithValues: try store.claim(queues: [queue], limit: 10, lease: .seconds(30)).map { ($0.id, $0.schedule) })
        XCTAssertEqual(schedules[queued]?.delays, [.seconds(1), .seconds(2)])
        XCTAssertEqual(schedules[ownBeside]?.delays, [.seconds(7)])
    }

    func testCompleteRecordsOutcomesAndAttemptRowsInOneBatch() throws {
        let ids = try enqueue(3)
        let store = JobStore(connection: connection, workerID: "w1")
        let claimed = try store.claim(queues: [queue], limit: 3, lease: .seconds(30))
        // A time with all six decimals: the statement receives it as microseconds since 1970.
        let now = Date(timeIntervalSince1970: 1_795_000_000.123456)
        let results: [Delivery] = [
            .delivered(status: 200), .response(status: 503, error: "HTTP 503"),
            .response(status: 400, error: "HTTP 400"),
        ]
        let records = zip(claimed, results).map { job, result in
            AttemptRecord(
                jobID: job.id, attempt: job.attempt,
                transition: JobTransition.decide(result, attempt: job.attempt, maxAttempts: job.maxAttempts,
                                                 schedule: RetrySchedule(delays: [.seconds(60)]), random: 0.5),
                delivery: { var d = result; d.responseExcerpt = "ok"; return d }(), startedAt: now, finishedAt: now.addingTimeInterval(0.012))
        }
        XCTAssertEqual(try store.recordOutcomes(records).changed, Set(ids))
        XCTAssertEqual(try ids.map(state), ["succeeded", "retrying", "dead"])
        let retry = try connection.query(
            "SELECT run_at > now() + interval '50 seconds', last_status, last_error, finished_at IS NULL FROM courier.jobs WHERE id = $1",
            [ids[1]])[0]
        XCTAssertEqual(try retry.decode(0, as: Bool.self), true)
        XCTAssertEqual(try retry.decode(1, as: Int.self), 503)
        XCTAssertEqual(try retry.decode(2, as: String.self), "HTTP 503")
        XCTAssertEqual(try retry.decode(3, as: Bool.self), true)
        let attempts = try connection.query(
            "SELECT job_id, attempt, status, round(duration_ms)::int, worker FROM courier.attempts WHERE job_id = ANY($1::bigint[]) ORDER BY job_id",
            [PostgresArray(ids)]).rows
        XCTAssertEqual(attempts.count, 3)
        XCTAssertEqual(try attempts[0].decode(3, as: Int.self), 12)
        XCTAssertEqual(try attempts[2].decode(4, as: String.self), "w1")
        let times = try connection.query(
            """
            SELECT to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'),
                   to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')
            FROM courier.attempts WHERE job_id = $1
            """, [ids[0]])[0]
        XCTAssertEqual(try times.decode(0, as: String.self), "2026-11-18 11:06:40.123456")
        XCTAssertEqual(try times.decode(1, as: String.self), "2026-11-18 11:06:40.135456")
        // The duration comes from the same microseconds, in float8 arithmetic: exactly the
        // interval between the two times, in milliseconds.
        let duration = try connection.query(
            "SELECT duration_ms, duration_ms = (extract(epoch FROM finished_at - started_at) * 1000)::float8 FROM courier.attempts WHERE job_id = $1",
            [ids[0]])[0]
        XCTAssertEqual(try duration.decode(0, as: Double.self), 12.0)
        XCTAssertEqual(try duration.decode(1, as: Bool.self), true)
    }

    /// An outcome batch calls `record_endpoint_outcomes` and `record_destination_outcomes` only
    /// when they can have something to do, and then they still do it: counted by PostgreSQL's
    /// function statistics, in one transaction (so `now()` stands still).
    func testAnOutcomeBatchCallsTheHealthFunctionsOnlyWhenTheyHaveSomethingToDo() throws {
        // A host of this test alone: the destination function's first call is for the host's
        // first success, which another test delivering to the same host earlier would have taken.
        let endpoint = "http://calls-\(queue!).test:9/hook"
        for _ in 0..<5 {
            try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2)", [endpoint + "?n=1", queue])
        }
        let store = JobStore(connection: connection, workerID: "w1")
        let jobs = try store.claim(queues: [queue], limit: 5, lease: .seconds(30)).sorted { $0.id < $1.id }
        XCTAssertEqual(jobs.count, 5)
        try connection.simpleQuery("BEGIN; SET LOCAL track_functions = 'pl'")
        func calls() throws -> [Int] {
            try ["record_endpoint_outcomes", "record_destination_outcomes"].map {
                try connection.query(
                    "SELECT coalesce(sum(calls), 0)::int FROM pg_stat_xact_user_functions WHERE schemaname = 'courier' AND funcname = $1",
                    [$0])[0].decode(0)
            }
        }
        // A success to a plain URL without a health row: nothing for the endpoint function; the
        // host's row has no last success yet, so the destination function writes it.
        try store.record([jobs[0]], .delivered(status: 200))
        XCTAssertEqual(try calls(), [0, 1])
        // Another within the same second: nothing for either.
        try store.record([jobs[1]], .delivered(status: 200))
        XCTAssertEqual(try calls(), [0, 1])
        // A 500: the endpoint's streak starts (the host answered, and answered within the second).
        try store.record([jobs[2]], .response(status: 500, error: "HTTP 500"))
        XCTAssertEqual(try calls(), [1, 1])
        // The endpoint is the URL without its query.
        func streak() throws -> Int {
            try connection.query(
                "SELECT failure_streak FROM courier.endpoint_health WHERE key = $1", [endpoint])[0].decode(0)
        }
        XCTAssertEqual(try streak(), 1)
        // The next success has a streak to reset.
        try store.record([jobs[3]], .delivered(status: 200))
        XCTAssertEqual(try calls(), [2, 1])
        XCTAssertEqual(try streak(), 0)
        // The host fails (nothing listened): both functions, the host's streak starts.
        try store.record([jobs[4]], .failure(.transport(.connectRefused), error: "connection refused"))
        XCTAssertEqual(try calls(), [3, 2])
        XCTAssertEqual(
            try connection.query(
                "SELECT failure_streak FROM courier.destinations WHERE host = $1", [jobs[4].host])[0].decode(0, as: Int.self),
            1)
        try connection.simpleQuery("COMMIT")
    }

    func testLateOutcomeAfterRescueChangesNothing() throws {
        let ids = try enqueue(1)
        let store = JobStore(connection: connection, workerID: "slow-worker")
        let claimed = try store.claim(queues: [queue], limit: 1, lease: .seconds(30))
        try connection.query("UPDATE courier.jobs SET locked_until = now() - interval '1 second' WHERE id = $1", [ids[0]])
        let report = try XCTUnwrap(try store.maintain(keepingSucceeded: .seconds(7) * 86_400, lease: .milliseconds(1)))
        XCTAssertGreaterThanOrEqual(report.rescuedToRetrying, 1)
        XCTAssertEqual(try state(ids[0]), "retrying")
        // Another worker claims it (attempt 2) and succeeds.
        let other = JobStore(connection: connection, workerID: "fast-worker")
        let again = try other.claim(queues: [queue], limit: 1, lease: .seconds(30))
        XCTAssertEqual(again.first?.attempt, 2)
        let now = Date()
        try other.recordOutcomes([
            AttemptRecord(jobID: ids[0], attempt: 2, transition: .succeed, delivery: .delivered(status: 200),
                          startedAt: now, finishedAt: now)
        ])
        // The first worker's late failure must not overwrite the success.
        let late = try store.recordOutcomes([
            AttemptRecord(jobID: ids[0], attempt: claimed[0].attempt, transition: .dead(reason: "late"),
                          delivery: .response(status: 400, error: "late"), startedAt: now, finishedAt: now)
        ]).changed
        XCTAssertEqual(late, [])
        XCTAssertEqual(try state(ids[0]), "succeeded")
    }

    /// The attempt rows of an outcome batch: every row of each job the batch moved (its
    /// requests repeated in process too), and a stale outcome's row once, whether the batch
    /// moved all its jobs or only some, however often it is sent.
    func testABatchWritesTheRowsOfTheJobsItMovedAndEachStaleOutcomeOnce() throws {
        // A host of its own, as the health-function test has.
        let ids: [Int64] = try (0..<4).map { i in
            try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2)",
                ["http://127.0.0.2:9/\(i)", queue])[0].decode(0)
        }
        let store = JobStore(connection: connection, workerID: "w1")
        let claimed = try store.claim(queues: [queue], limit: 4, lease: .seconds(30)).sorted { $0.id < $1.id }
        XCTAssertEqual(claimed.map(\.id), ids)
        let start = Date(timeIntervalSince1970: 1_795_000_000)
        func record(_ job: ClaimedJob, at offset: Double, repeated: Int = 0) -> AttemptRecord {
            var delivery = Delivery.delivered(status: 200)
            delivery.inProcess = (0..<repeated).map { i in
                InProcessAttempt(
                    startedAt: start.addingTimeInterval(offset - 0.5 + Double(i) * 0.1),
                    finishedAt: start.addingTimeInterval(offset - 0.45 + Double(i) * 0.1), status: nil,
                    error: "connection reset before a complete response")
            }
            return AttemptRecord(
                jobID: job.id, attempt: job.attempt, transition: .succeed, delivery: delivery,
                startedAt: start.addingTimeInterval(offset), finishedAt: start.addingTimeInterval(offset + 0.01),
                host: job.host)
        }
        func rows() throws -> [Int] {
            try ids.map {
                try connection.query("SELECT count(*)::int FROM courier.attempts WHERE job_id = $1", [$0])[0].decode(0)
            }
        }
        // Every job of the batch moves: each writes its row and its repeated requests' rows.
        let first = [record(claimed[0], at: 1, repeated: 2), record(claimed[1], at: 1)]
        XCTAssertEqual(try store.recordOutcomes(first).changed, Set(ids[0...1]))
        XCTAssertEqual(try rows(), [3, 1, 0, 0])
        // The third job moves; beside it the first batch again (its COMMIT's answer lost:
        // nothing new) and a later outcome of the second job, never written (kept once as history).
        let stale = record(claimed[1], at: 2)
        let mixed = first + [stale, record(claimed[2], at: 1, repeated: 1)]
        XCTAssertEqual(try store.recordOutcomes(mixed).changed, [ids[2]])
        XCTAssertEqual(try rows(), [3, 2, 2, 0])
        XCTAssertEqual(try store.recordOutcomes(mixed).changed, [])
        XCTAssertEqual(try rows(), [3, 2, 2, 0], "written once, however often the batch comes")
        XCTAssertEqual(try ids.map(state), ["succeeded", "succeeded", "succeeded", "running"])
    }

    func testHeartbeatExtendsOnlyLeasesStillHeld() throws {
        let ids = try enqueue(2)
        let store = JobStore(connection: connection, workerID: "w1")
        _ = try store.claim(queues: [queue], limit: 2, lease: .seconds(1))
        try connection.query("UPDATE courier.jobs SET locked_by = 'someone-else' WHERE id = $1", [ids[1]])
        XCTAssertEqual(try store.heartbeat(ids, lease: .seconds(60)), [ids[0]])
        XCTAssertEqual(
            try connection.query("SELECT locked_until > now() + interval '50 seconds' FROM courier.jobs WHERE id = $1", [ids[0]])[0]
                .decode(0, as: Bool.self), true)
    }

    /// A heartbeat moves only `locked_until`; with no index on it, PostgreSQL can write the new
    /// row version on the same page without touching any index (a HOT update).
    func testHeartbeatChangesNoIndexedColumn() throws {
        let indexes: [String] = try connection.query("""
            SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = 'courier.jobs'::regclass
              AND (EXISTS (SELECT 1 FROM pg_attribute a
                           WHERE a.attrelid = i.indrelid AND a.attname = 'locked_until' AND a.attnum = ANY (i.indkey))
                   OR coalesce(pg_get_expr(i.indexprs, i.indrelid), '') LIKE '%locked_until%'
                   OR coalesce(pg_get_expr(i.indpred, i.indrelid), '') LIKE '%locked_until%')
            """).rows.map { try $0.decode(0) }
        XCTAssertEqual(indexes, [])
        XCTAssertTrue(WorkerStatements.heartbeat.sql.contains("SET locked_until ="))
        XCTAssertFalse(WorkerStatements.heartbeat.sql.contains(","), "the heartbeat sets one column")
    }

    func testReleaseUncountsTheAttempt() throws {
        let ids = try enqueue(1)
        let store = JobStore(connection: connection, workerID: "w1")
        let claimed = try store.claim(queues: [queue], limit: 1, lease: .seconds(1))
        XCTAssertEqual(try store.release(claimed.map { ($0.id, $0.attempt) }, delay: .zero), 1)
        let row = try connection.query("SELECT state::text, attempt, locked_by FROM courier.jobs WHERE id = $1", [ids[0]])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "pending")
        XCTAssertEqual(try row.decode(1, as: Int.self), 0)
        XCTAssertNil(try row.decode(2, as: String?.self))
    }

    func testRescueOfExhaustedJobGoesDead() throws {
        let ids = try enqueue(1, maxAttempts: 1)
        let store = JobStore(connection: connection, workerID: "w1")
        _ = try store.claim(queues: [queue], limit: 1, lease: .seconds(1))
        try connection.query("UPDATE courier.jobs SET locked_until = now() - interval '1 second' WHERE id = $1", [ids[0]])
        _ = try store.maintain(keepingSucceeded: .seconds(86_400), lease: .milliseconds(1))
        let row = try connection.query("SELECT state::text, last_error FROM courier.jobs WHERE id = $1", [ids[0]])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "dead")
        XCTAssertTrue(try row.decode(1, as: String.self).contains("lease expired"))
    }

    func testRetentionDeletesOldSucceededJobsWithTheirAttempts() throws {
        let ids = try enqueue(1)
        let store = JobStore(connection: connection, workerID: "w1")
        let claimed = try store.claim(queues: [queue], limit: 1, lease: .seconds(1))
        try store.recordOutcomes([
            AttemptRecord(jobID: ids[0], attempt: claimed[0].attempt, transition: .succeed, delivery: .delivered(status: 200),
                          startedAt: Date(), finishedAt: Date())
        ])
        try connection.query("UPDATE courier.jobs SET finished_at = now() - interval '8 days' WHERE id = $1", [ids[0]])
        let report = try XCTUnwrap(try store.maintain(keepingSucceeded: .seconds(7) * 86_400, lease: .milliseconds(1)))
        XCTAssertGreaterThanOrEqual(report.deletedSucceeded, 1)
        XCTAssertEqual(try connection.query("SELECT count(*) FROM courier.attempts WHERE job_id = $1", [ids[0]])[0].decode(0, as: Int.self), 0)
    }

    func testArrayParametersRoundTripQuotesAndNulls() throws {
        let values: [String?] = ["a\"b", "c\\d", nil, "", "x,y", "{z}", "caf\u{E9} \u{2713} \u{1F680}", "NULL"]
        let text: String = try connection.query("SELECT $1::text[]::text", [PostgresArray(values)])[0].decode(0)
        XCTAssertEqual(PostgresArray.parse(text), values)
        let bytes: [UInt8] = [0, 255, 92, 34, 123, 44]
        let row = try connection.query(
            "SELECT ($1::bytea[])[1], ($1::bytea[])[2] IS NULL, cardinality($1::bytea[])", [PostgresArray([bytes, nil] as [[UInt8]?])])[0]
        XCTAssertEqual(try row.decode(0, as: [UInt8].self), bytes)
        XCTAssertEqual(try row.decode(1, as: Bool.self), true)
        XCTAssertEqual(try row.decode(2, as: Int.self), 2)
    }
}
