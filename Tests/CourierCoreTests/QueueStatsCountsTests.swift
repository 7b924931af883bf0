import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// `courier.queue_stats` reads counts kept by statement triggers (migration 0006): after any
/// mix of writes they equal an exact count, before and after a fold, and the lag is the age of
/// the oldest due job only.
final class QueueStatsCountsTests: OwnDatabaseTestCase {
    override var databaseLabel: String { "stats" }

    private func viewCounts() throws -> [String: Int] {
        var out: [String: Int] = [:]
        for row in try connection.query("SELECT queue || '/' || state, jobs FROM courier.queue_stats").rows {
            out[try row.decode(0)] = try row.decode(1)
        }
        return out
    }

    private func exactCounts() throws -> [String: Int] {
        var out: [String: Int] = [:]
        for row in try connection.query(
            "SELECT queue || '/' || state, count(*) FROM courier.jobs GROUP BY queue, state"
        ).rows {
            out[try row.decode(0)] = try row.decode(1)
        }
        return out
    }

    private func assertCountsExact(_ message: String, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(try viewCounts(), try exactCounts(), message, file: file, line: line)
        _ = try connection.query(WorkerStatements.foldJobCounts.sql)
        XCTAssertEqual(try viewCounts(), try exactCounts(), "\(message), after a fold", file: file, line: line)
    }

    private func enqueue(_ count: Int, queue: String) throws -> [Int64] {
        try (0..<count).map { i in
            try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2, max_attempts => 2)",
                ["https://a.example/\(i)", queue])[0].decode(0, as: Int64.self)
        }
    }

    func testCountsStayExactThroughEveryKindOfWrite() throws {
        let a = try enqueue(5, queue: "a")
        _ = try enqueue(3, queue: "b")
        try assertCountsExact("enqueue")
        let store = JobStore(connection: connection, workerID: "w")
        let claimed = try store.claim(queues: ["a"], limit: 4, lease: .seconds(30))
        try assertCountsExact("claim")
        XCTAssertEqual(try store.heartbeat(claimed.map(\.id), lease: .seconds(30)).count, 4)
        let now = Date()
        let results: [(JobTransition, Delivery)] = [
            (.succeed, .delivered(status: 200)), (.succeed, .delivered(status: 200)),
            (.retry(delay: .zero), .response(status: 503, error: "HTTP 503")),
            (.dead(reason: "HTTP 400"), .response(status: 400, error: "HTTP 400")),
        ]
        try store.recordOutcomes(zip(claimed, results).map { job, outcome in
            AttemptRecord(jobID: job.id, attempt: job.attempt, transition: outcome.0, delivery: outcome.1,
                          startedAt: now, finishedAt: now)
        })
        try assertCountsExact("outcomes")
        try connection.query(
            "UPDATE courier.jobs SET state = 'cancelled', finished_at = now() WHERE id = $1 AND state = 'pending'", [a[4]])
        try connection.query(
            "UPDATE courier.jobs SET state = 'pending', attempt = 0, finished_at = NULL WHERE state = 'dead'")
        try connection.query("UPDATE courier.jobs SET queue = 'c' WHERE queue = 'b'")
        try assertCountsExact("cancel, requeue, move")
        try connection.query("UPDATE courier.jobs SET finished_at = now() - interval '40 days' WHERE finished_at IS NOT NULL")
        _ = try store.maintain(retention: RetentionDefaults())
        try assertCountsExact("retention")
        try connection.query("DELETE FROM courier.jobs WHERE queue = 'c'")
        try assertCountsExact("delete")
        try connection.simpleQuery("BEGIN")
        _ = try enqueue(2, queue: "rolled-back")
        try connection.simpleQuery("ROLLBACK")
        try assertCountsExact("rollback")
        try connection.simpleQuery("TRUNCATE courier.jobs CASCADE")
        XCTAssertEqual(try viewCounts(), [:])
        _ = try enqueue(1, queue: "a")
        try assertCountsExact("after truncate")
    }

    func testFoldingTwiceAtOnceCountsEachChangeOnce() throws {
        _ = try enqueue(20, queue: "a")
        let other = try PostgresConnection(url)
        defer { other.close() }
        let ownPID: Int = try connection.query("SELECT pg_backend_pid()")[0].decode(0)
        let otherPID: Int = try other.query("SELECT pg_backend_pid()")[0].decode(0)
        try connection.simpleQuery("BEGIN")
        let folded: Int = try connection.query(WorkerStatements.foldJobCounts.sql)[0].decode(0)
        XCTAssertEqual(folded, 20)
        // The second fold waits on the first's rows, then finds them gone.
        let group = DispatchGroup()
        let results = ResultBox()
        DispatchQueue.global().async(group: group) {
            results.add(Result { try other.query(WorkerStatements.foldJobCounts.sql)[0].decode(0, as: Int.self) })
        }
        // Commit only once the second fold is blocked behind this transaction (the lock
        // manager's own view, not a guess at how long that takes).
        let deadline = Date().addingTimeInterval(30)
        var blocked = false
        while !blocked && Date() < deadline {
            blocked = try connection.query("SELECT $1::int = ANY(pg_blocking_pids($2::int))", [ownPID, otherPID])[0].decode(0)
            if !blocked { Thread.sleep(forTimeInterval: 0.01) }
        }
        XCTAssertTrue(blocked, "the second fold never waited on the first")
        try connection.simpleQuery("COMMIT")
        group.wait()
        XCTAssertEqual(try results.all.map { try $0.get() }, [0])
        XCTAssertEqual(try viewCounts(), ["a/pending": 20])
    }

    func testLagIsTheAgeOfTheOldestDueJobAndNeverOfDeadOrFutureOnes() throws {
        try connection.simpleQuery(
            """
            INSERT INTO courier.jobs (queue, state, url, attempt, max_attempts, run_at, finished_at)
            VALUES ('q', 'dead', 'https://a.example/', 3, 3, now() - interval '300 days', now() - interval '1 day'),
                   ('q', 'succeeded', 'https://a.example/', 1, 3, now() - interval '200 days', now()),
                   ('q', 'pending', 'https://a.example/', 0, 3, now() - interval '30 seconds', NULL),
                   ('q', 'pending', 'https://a.example/', 0, 3, now() + interval '1 hour', NULL),
                   ('q', 'retrying', 'https://a.example/', 1, 3, now() + interval '1 hour', NULL),
                   ('idle', 'dead', 'https://a.example/', 3, 3, now() - interval '300 days', now())
            """)
        var lag: [String: Double?] = [:]
        for row in try connection.query("SELECT queue || '/' || state, lag_seconds FROM courier.queue_stats").rows {
            lag[try row.decode(0)] = try row.decode(1, as: Double?.self)
        }
        XCTAssertEqual(lag.count, 5)
        XCTAssertEqual(try XCTUnwrap(lag["q/pending"] ?? nil), 30, accuracy: 5)
        XCTAssertEqual(lag["q/retrying"] ?? -1, 0)
        XCTAssertEqual(lag["q/dead"] ?? -1, nil)
        XCTAssertEqual(lag["q/succeeded"] ?? -1, nil)
        XCTAssertEqual(lag["idle/dead"] ?? -1, nil)
        let oldest: String? = try connection.query(
            "SELECT oldest_run_at::text FROM courier.queue_stats WHERE queue = 'q' AND state = 'dead'")[0].decode(0)
        XCTAssertNil(oldest)
        // The CLI's view of one queue reads the same numbers.
        let counts = try AdminStore(connection: connection).stateCounts(of: "q")
        XCTAssertEqual(counts.map(\.state), ["pending", "retrying", "succeeded", "dead"])
        XCTAssertEqual(counts.map(\.jobs), [2, 1, 1, 1])
        // `courier stats` reports the same lag: the due pending job's, not the dead ones'.
        let health = try AdminStore(connection: connection).stats().queues
        XCTAssertEqual(try XCTUnwrap(health.first { $0.queue == "q" }).lag.seconds, 30, accuracy: 5)
        XCTAssertEqual(try XCTUnwrap(health.first { $0.queue == "idle" }).lag, .zero)
    }

    func testTheViewReadsTheCountsNotTheJobs() throws {
        // The plan of the view touches job rows only through jobs_queue_due_idx (the oldest
        // waiting job) and the running rows of a queue, never a scan of courier.jobs.
        _ = try enqueue(3, queue: "a")
        try connection.simpleQuery("SET enable_seqscan = off")
        let plan = try connection.query("EXPLAIN (COSTS OFF) SELECT * FROM courier.queue_stats").rows
            .map { try $0.decode(0, as: String.self) }.joined(separator: "\n")
        XCTAssertFalse(plan.contains("Seq Scan on jobs"), plan)
        XCTAssertTrue(plan.contains("jobs_queue_due_idx"), plan)
    }

    func testTheBenchmarksEndOfDrainReadsTheCounts() throws {
        // `courier bench` asks this while a drain runs: it must follow every state change of
        // the queue it names, folded or not, and read no job row.
        func unfinished(_ queue: String) throws -> Int {
            try connection.run(BenchStatements.unfinishedCount, queue)[0].decode(0)
        }
        XCTAssertEqual(try unfinished("a"), 0)
        _ = try enqueue(2, queue: "a")
        _ = try enqueue(1, queue: "b")
        XCTAssertEqual(try unfinished("a"), 2)
        let store = JobStore(connection: connection, workerID: "w")
        let claimed = try store.claim(queues: ["a"], limit: 2, lease: .seconds(30))
        XCTAssertEqual(claimed.count, 2)
        _ = try connection.query(WorkerStatements.foldJobCounts.sql)
        XCTAssertEqual(try unfinished("a"), 2, "running jobs are unfinished")
        let now = Date()
        try store.recordOutcomes([
            AttemptRecord(jobID: claimed[0].id, attempt: claimed[0].attempt, transition: .succeed,
                          delivery: .delivered(status: 200), startedAt: now, finishedAt: now)
        ])
        XCTAssertEqual(try unfinished("a"), 1, "one job is still running")
        try store.recordOutcomes([
            AttemptRecord(jobID: claimed[1].id, attempt: claimed[1].attempt, transition: .dead(reason: "HTTP 400"),
                          delivery: .response(status: 400, error: "HTTP 400"), startedAt: now, finishedAt: now)
        ])
        XCTAssertEqual(try unfinished("a"), 0, "succeeded and dead jobs are finished")
        XCTAssertEqual(try unfinished("b"), 1, "another queue's pending job is its own")
        _ = try connection.query(WorkerStatements.foldJobCounts.sql)
        XCTAssertEqual(try unfinished("a"), 0)
        XCTAssertEqual(try unfinished("b"), 1)
        let plan = try connection.query(
            "EXPLAIN (COSTS OFF) " + BenchStatements.unfinishedCount.sql.replacingOccurrences(of: "$1", with: "'a'")
        ).rows.map { try $0.decode(0, as: String.self) }.joined(separator: "\n")
        XCTAssertFalse(plan.contains(" jobs"), plan)
    }
}
