import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Retention per state and per queue (migration 0006, `JobStore.maintain`), against a database
/// of each test's own so no other test's rows are deleted or counted.
final class RetentionTests: OwnDatabaseTestCase {
    override var databaseLabel: String { "retention" }

    /// Inserts `count` jobs of `queue` in `state`; finished ones finished `age` seconds ago.
    @discardableResult
    private func insert(
        _ count: Int, queue: String, state: String, age: Double = 0, attempts: Bool = true
    ) throws -> [Int64] {
        let finished = ["succeeded", "cancelled", "dead"].contains(state)
        let ids = try connection.query(
            """
            INSERT INTO courier.jobs (queue, state, url, attempt, run_at, created_at, finished_at, locked_by, locked_until)
            SELECT $1, $2::courier.job_state, 'https://a.example/hook', CASE WHEN $2 = 'pending' THEN 0 ELSE 1 END,
                   now() - $3::float8 * interval '1 second' - interval '1 hour',
                   now() - $3::float8 * interval '1 second' - interval '1 hour',
                   CASE WHEN $4 THEN now() - $3::float8 * interval '1 second' END,
                   CASE WHEN $2 = 'running' THEN 'w' END,
                   CASE WHEN $2 = 'running' THEN now() + interval '1 minute' END
            FROM generate_series(1, $5)
            RETURNING id
            """, [queue, state, age, finished, count]
        ).rows.map { try $0.decode(0, as: Int64.self) }
        if attempts {
            try connection.query(
                """
                INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, worker)
                SELECT id, 1, now(), now(), 1, 200, 'w' FROM unnest($1::bigint[]) AS id
                """, [PostgresArray(ids)])
        }
        return ids
    }

    private func count(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> Int {
        try connection.query(sql, parameters)[0].decode(0)
    }

    private func remaining(_ queue: String, _ state: String) throws -> Int {
        try count("SELECT count(*) FROM courier.jobs WHERE queue = $1 AND state = $2::courier.job_state", [queue, state])
    }

    private let day = 86_400.0

    func testDefaultRetentionDiffersPerState() throws {
        // Defaults: succeeded 7 days, cancelled 7 days, dead 30 days.
        try insert(3, queue: "a", state: "succeeded", age: 8 * day)
        try insert(2, queue: "a", state: "succeeded", age: 6 * day)
        try insert(3, queue: "a", state: "cancelled", age: 8 * day)
        try insert(2, queue: "a", state: "cancelled", age: 6 * day)
        try insert(3, queue: "a", state: "dead", age: 31 * day)
        try insert(2, queue: "a", state: "dead", age: 8 * day)
        let store = JobStore(connection: connection, workerID: "w")
        let report = try XCTUnwrap(try store.maintain(retention: RetentionDefaults()))
        XCTAssertEqual(report.deletedSucceeded, 3)
        XCTAssertEqual(report.deletedCancelled, 3)
        XCTAssertEqual(report.deletedDead, 3)
        XCTAssertTrue(report.caughtUp)
        XCTAssertEqual(try remaining("a", "succeeded"), 2)
        XCTAssertEqual(try remaining("a", "cancelled"), 2)
        XCTAssertEqual(try remaining("a", "dead"), 2)
        // The worker's --retention moves only the succeeded default.
        let again = try XCTUnwrap(try store.maintain(keepingSucceeded: .seconds(5) * day))
        XCTAssertEqual(again.deleted, 2)
        XCTAssertEqual(try remaining("a", "succeeded"), 0)
        XCTAssertEqual(try remaining("a", "cancelled"), 2)
    }

    func testQueueSettingsOverrideTheDefaultsForThatQueueOnly() throws {
        try AdminStore(connection: connection).updateRetention("short", {
            var change = QueueRetentionChange()
            change.keepSucceeded = .some(.seconds(3600))
            change.keepDead = .some(.seconds(2 * day))
            return change
        }())
        try AdminStore(connection: connection).updateRetention("long", {
            var change = QueueRetentionChange()
            change.keepSucceeded = .some(.seconds(90 * day))
            change.keepCancelled = .some(.seconds(0))
            return change
        }())
        XCTAssertEqual(
            try AdminStore(connection: connection).retention(of: "short"),
            QueueRetention(keepSucceeded: .seconds(3600), keepCancelled: nil, keepDead: .seconds(2 * day)))
        for queue in ["short", "long", "plain"] {
            try insert(2, queue: queue, state: "succeeded", age: 2 * 3600)
            try insert(2, queue: queue, state: "succeeded", age: 10 * day)
            try insert(2, queue: queue, state: "dead", age: 3 * day)
            try insert(2, queue: queue, state: "cancelled", age: 60)
        }
        let report = try XCTUnwrap(try JobStore(connection: connection, workerID: "w").maintain(retention: RetentionDefaults()))
        XCTAssertEqual(try remaining("short", "succeeded"), 0)  // 1 hour
        XCTAssertEqual(try remaining("short", "dead"), 0)  // 2 days
        XCTAssertEqual(try remaining("short", "cancelled"), 2)  // default 7 days
        XCTAssertEqual(try remaining("long", "succeeded"), 4)  // 90 days
        XCTAssertEqual(try remaining("long", "cancelled"), 0)  // 0: at the next pass
        XCTAssertEqual(try remaining("long", "dead"), 2)  // default 30 days
        XCTAssertEqual(try remaining("plain", "succeeded"), 2)  // default 7 days
        XCTAssertEqual(try remaining("plain", "dead"), 2)
        XCTAssertEqual(try remaining("plain", "cancelled"), 2)
        XCTAssertEqual(report.deletedSucceeded, 6)
        XCTAssertEqual(report.deletedDead, 2)
        XCTAssertEqual(report.deletedCancelled, 2)
        // `default` restores the worker's value.
        var reset = QueueRetentionChange()
        reset.keepSucceeded = .some(nil)
        try AdminStore(connection: connection).updateRetention("long", reset)
        XCTAssertEqual(try AdminStore(connection: connection).retention(of: "long"), QueueRetention(keepCancelled: .zero))
        XCTAssertEqual(try AdminStore(connection: connection).retention(of: "nothing-set"), QueueRetention())
    }

    func testRetentionOutsideTheAllowedRangeIsRefusedByTheTable() throws {
        var change = QueueRetentionChange()
        change.keepDead = .some(.seconds(-1))
        XCTAssertThrowsError(try AdminStore(connection: connection).updateRetention("q", change)) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "23514")
        }
        change.keepDead = .some(.seconds(3651 * day))
        XCTAssertThrowsError(try AdminStore(connection: connection).updateRetention("q", change))
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues"), 0)
    }

    func testLiveJobsAreNeverRemovedWhateverTheirAge() throws {
        var change = QueueRetentionChange()
        change.keepSucceeded = .some(.seconds(0))
        change.keepCancelled = .some(.seconds(0))
        change.keepDead = .some(.seconds(0))
        try AdminStore(connection: connection).updateRetention("q", change)
        let pending = try insert(3, queue: "q", state: "pending", age: 400 * day)
        let running = try insert(3, queue: "q", state: "running", age: 400 * day)
        let retrying = try insert(3, queue: "q", state: "retrying", age: 400 * day)
        // A dead job requeued: finished_at gone, state pending.
        let requeued = try insert(1, queue: "q", state: "dead", age: 400 * day)
        try connection.query(
            "UPDATE courier.jobs SET state = 'pending', attempt = 0, finished_at = NULL WHERE id = $1", [requeued[0]])
        try insert(5, queue: "q", state: "succeeded", age: 1)
        let report = try XCTUnwrap(
            try JobStore(connection: connection, workerID: "w").maintain(retention: RetentionDefaults(succeeded: .zero, cancelled: .zero, dead: .zero)))
        XCTAssertEqual(report.deleted, 5)
        let live = pending + running + retrying + requeued
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = ANY ($1::bigint[])", [PostgresArray(live)]), 10)
        XCTAssertEqual(
            try count("SELECT count(*) FROM courier.attempts WHERE job_id = ANY ($1::bigint[])", [PostgresArray(live)]), 10)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs"), 10)
    }

    func testPublishedMessagesGoOnceTheirDeliveriesAreGoneAndTheLongestRetentionHasPassed() throws {
        let webhooks = WebhookStore(connection: connection)
        _ = try webhooks.addEndpoint(NewEndpoint(url: "https://a.example/hook", eventTypes: ["*"]), seal: { _ in [UInt8](repeating: 1, count: 40) })
        let delivered = try webhooks.publish(eventType: "a.b", payload: "{}")
        let unmatched = try webhooks.publish(eventType: "a.b", payload: "{}", tenant: "nobody")
        let young = try webhooks.publish(eventType: "a.b", payload: "{}", tenant: "nobody")
        try connection.query("""
            UPDATE courier.jobs SET state = 'succeeded', attempt = 1, finished_at = now() - interval '40 days'
            WHERE message_id = $1
            """, [delivered.messageID])
        try connection.query("UPDATE courier.messages SET created_at = now() - interval '40 days' WHERE id = ANY ($1::bigint[])",
                             [PostgresArray([delivered.messageID, unmatched.messageID])])
        let report = try XCTUnwrap(try JobStore(connection: connection, workerID: "w").maintain(retention: RetentionDefaults()))
        XCTAssertEqual(report.deletedSucceeded, 1)
        XCTAssertEqual(report.deletedMessages, 2, "the delivered one after its job, the unmatched one by age")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.messages WHERE id = $1", [young.messageID]), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.messages"), 1)
    }

    func testAttemptsGoWithTheirJob() throws {
        let old = try insert(4, queue: "q", state: "succeeded", age: 8 * day)
        let young = try insert(4, queue: "q", state: "succeeded", age: 1)
        try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, worker)
            SELECT id, 2, now(), now(), 1, 503, 'w' FROM unnest($1::bigint[]) AS id
            """, [PostgresArray(old + young)])
        _ = try JobStore(connection: connection, workerID: "w").maintain(retention: RetentionDefaults())
        XCTAssertEqual(try count("SELECT count(*) FROM courier.attempts WHERE job_id = ANY ($1::bigint[])", [PostgresArray(old)]), 0)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.attempts WHERE job_id = ANY ($1::bigint[])", [PostgresArray(young)]), 8)
    }

    func testAPassStopsOnItsBudgetAndTheNextCatchesUp() throws {
        try insert(35, queue: "q", state: "succeeded", age: 8 * day, attempts: false)
        var now = Duration.zero
        // Each reading of the clock advances it 0.6 s: the second batch ends past the 1 s budget.
        let clock = { () -> Duration in
            now += .milliseconds(600)
            return now
        }
        let store = JobStore(connection: connection, workerID: "w")
        let budget = RetentionBudget(batchSize: 10, time: .seconds(1))
        let first = try XCTUnwrap(try store.maintain(retention: RetentionDefaults(), budget: budget, clock: clock))
        XCTAssertEqual(first.deleted, 20)
        XCTAssertEqual(first.deleteBatches, 2)
        XCTAssertFalse(first.caughtUp)
        XCTAssertEqual(budget.nextPass(after: first, interval: .seconds(5)), .milliseconds(100))
        let second = try XCTUnwrap(try store.maintain(retention: RetentionDefaults(), budget: RetentionBudget(batchSize: 10)))
        XCTAssertEqual(second.deleted, 15)
        XCTAssertEqual(second.deleteBatches, 2)
        XCTAssertTrue(second.caughtUp)
        XCTAssertEqual(budget.nextPass(after: second, interval: .seconds(5)), .seconds(5))
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs"), 0)
    }

    func testOnlyOnePassRunsAtATimeAcrossTheFleet() throws {
        let other = try PostgresConnection(url)
        defer { other.close() }
        try insert(3, queue: "q", state: "succeeded", age: 8 * day)
        XCTAssertEqual(try other.query(WorkerStatements.tryMaintenanceLock.sql)[0].decode(0, as: Bool.self), true)
        XCTAssertNil(try JobStore(connection: connection, workerID: "w").maintain(retention: RetentionDefaults()))
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs"), 3)
        // A worker of an older version takes the same key per transaction: still excluded.
        try other.query(WorkerStatements.maintenanceUnlock.sql)
        try other.simpleQuery("BEGIN; SELECT pg_try_advisory_xact_lock(7236833176593199461)")
        XCTAssertNil(try JobStore(connection: connection, workerID: "w").maintain(retention: RetentionDefaults()))
        try other.simpleQuery("COMMIT")
        let report = try XCTUnwrap(try JobStore(connection: connection, workerID: "w").maintain(retention: RetentionDefaults()))
        XCTAssertEqual(report.deleted, 3)
        // The pass released its lock: another session can take it now.
        XCTAssertEqual(try other.query(WorkerStatements.tryMaintenanceLock.sql)[0].decode(0, as: Bool.self), true)
        try other.query(WorkerStatements.maintenanceUnlock.sql)
    }

    func testTwoCleanersAtOnceRemoveEachRowOnceAndNeverWaitForEachOther() throws {
        try insert(100, queue: "q", state: "succeeded", age: 8 * day)
        let first = try PostgresConnection(url)
        defer { first.close() }
        let second = try PostgresConnection(url)
        defer { second.close() }
        let parameters: [any PostgresEncodable] = [7 * day, 7 * day, 30 * day, 60]
        // The first cleaner deletes 60 rows and keeps its transaction open, holding their locks.
        try first.simpleQuery("BEGIN")
        let a: Int = try first.query(WorkerStatements.deleteExpiredFinished.sql, parameters)[0].decode(0)
        XCTAssertEqual(a, 60)
        // The second skips them instead of waiting: a lock wait would fail under lock_timeout.
        try second.simpleQuery("SET lock_timeout = '2s'")
        let b: Int = try second.query(WorkerStatements.deleteExpiredFinished.sql, parameters)[0].decode(0)
        XCTAssertEqual(b, 40)
        let c: Int = try second.query(WorkerStatements.deleteExpiredFinished.sql, parameters)[0].decode(0)
        XCTAssertEqual(c, 0)
        try first.simpleQuery("COMMIT")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs"), 0)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.attempts"), 0)

        // Many cleaners in parallel, each in autocommit: every row deleted exactly once.
        try insert(3000, queue: "q", state: "succeeded", age: 8 * day, attempts: false)
        let results = ResultBox()
        let url = self.url, day = self.day
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            results.add(Result {
                let connection = try PostgresConnection(url)
                defer { connection.close() }
                try connection.simpleQuery("SET lock_timeout = '2s'")
                var deleted = 0
                while true {
                    let n: Int = try connection.query(
                        WorkerStatements.deleteExpiredFinished.sql, [7 * day, 7 * day, 30 * day, 100])[0].decode(0)
                    if n == 0 { return deleted }
                    deleted += n
                }
            })
        }
        XCTAssertEqual(try results.all.map { try $0.get() }.reduce(0, +), 3000)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs"), 0)
    }
}
