import CourierCore
import CourierModel
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0020: running and succeeded jobs take no entry in `jobs_state_queue_idx` (a
/// delivered job took two there, one at its claim and one at its outcome), and
/// `jobs_host_running_idx` is keyed by (host, id). Every reader that named a state through the
/// old index must still find every queue and count every job beside many succeeded ones, through
/// the indexes that hold those states now, never by reading the table.
final class StateIndexTests: OwnDatabaseTestCase {
    override var databaseLabel: String { "stateindex" }

    /// Queue `history`: 20,000 jobs succeeded yesterday. Queue `busy`: only 3 running jobs.
    /// Queue `done`: only 2 succeeded jobs. Queue `waiting`: 4 pending (one due in an hour) and
    /// 1 retrying. Queue `failed`: 2 dead. Queue `stopped`: 1 cancelled.
    private func history() throws { try connection.simpleQuery(Self.historySQL) }

    private static let historySQL = """
        INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
        SELECT 'history', 'succeeded', 'https://history.example/' || i, 1, now() - interval '1 day'
        FROM generate_series(1, 20000) AS i;
        INSERT INTO courier.jobs (queue, state, url, attempt, locked_by, locked_until)
        SELECT 'busy', 'running', 'https://busy.example/', 1, 'w', now() + interval '1 minute'
        FROM generate_series(1, 3);
        INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
        SELECT 'done', 'succeeded', 'https://done.example/', 1, now() FROM generate_series(1, 2);
        INSERT INTO courier.jobs (queue, url) SELECT 'waiting', 'https://waiting.example/' FROM generate_series(1, 3);
        INSERT INTO courier.jobs (queue, url, run_at) VALUES ('waiting', 'https://waiting.example/', now() + interval '1 hour');
        INSERT INTO courier.jobs (queue, state, url, attempt) VALUES ('waiting', 'retrying', 'https://waiting.example/', 1);
        INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
        SELECT 'failed', 'dead', 'https://failed.example/', 1, now() FROM generate_series(1, 2);
        INSERT INTO courier.jobs (queue, state, url, finished_at)
        VALUES ('stopped', 'cancelled', 'https://stopped.example/', now());
        ANALYZE courier.jobs;
        """

    private let queues = ["busy", "done", "failed", "history", "stopped", "waiting"]

    /// No sequential scan of `courier.jobs`, and at most `rows` rows handled by any step.
    private func assertReadsIndexesOnly(
        _ sql: String, arguments: String = "", name: String, rows: Int, line: UInt = #line
    ) throws {
        let plan = try explainRolledBack(sql, arguments: arguments, name: name)
        let read = scans(plan: plan)
        XCTAssertFalse(read.contains { $0.type == "Seq Scan" && $0.relation == "jobs" }, "\(name): \(read)", line: line)
        XCTAssertLessThanOrEqual(mostRows(plan: plan), rows, "\(name) handled \(mostRows(plan: plan)) rows", line: line)
    }

    func testTheIndexesHoldWhatTheMigrationSays() throws {
        func definition(_ index: String) throws -> String {
            try connection.query("SELECT indexdef FROM pg_indexes WHERE schemaname = 'courier' AND indexname = $1", [index])[0]
                .decode(0)
        }
        let listed = try definition("jobs_state_queue_idx")
        XCTAssertTrue(listed.contains("(state, queue, id)"), listed)
        XCTAssertTrue(listed.contains("WHERE (state = ANY"), listed)
        for state in ["pending", "retrying", "dead", "cancelled"] { XCTAssertTrue(listed.contains(state), listed) }
        for state in ["running", "succeeded"] { XCTAssertFalse(listed.contains(state), listed) }
        let running = try definition("jobs_host_running_idx")
        XCTAssertTrue(running.contains("(host, id) WHERE (state = 'running'"), running)
    }

    func testEveryQueueIsFoundWhateverStateItsJobsAreIn() throws {
        try history()
        let known = try connection.run(AdminStatements.knownQueues).rows.map { try $0.decode(0, as: String.self) }
        XCTAssertEqual(known, queues)
        let listed = try connection.run(AdminStatements.listQueues).rows.map { try $0.decode(0, as: String.self) }
        XCTAssertEqual(listed, queues)
        for queue in queues {
            XCTAssertTrue(try connection.run(AdminStatements.queueExists, queue)[0].decode(0), queue)
        }
        XCTAssertFalse(try connection.run(AdminStatements.queueExists, "nowhere")[0].decode(0))
        XCTAssertFalse(try connection.run(AdminStatements.queueExists, "histor")[0].decode(0))

        try assertReadsIndexesOnly(AdminStatements.knownQueues.sql, name: "known_queues", rows: 20)
        for queue in ["busy", "done", "nowhere"] {
            try assertReadsIndexesOnly(
                AdminStatements.queueExists.sql, arguments: "'\(queue)'", name: "exists_\(queue)", rows: 20)
        }
    }

    func testStatsCountEveryUnfinishedStateWithoutReadingTheHistory() throws {
        try history()
        var counts: [String: Int] = [:]
        for row in try connection.run(AdminStatements.statsActive).rows {
            counts["\(try row.decode(0, as: String.self)) \(try row.decode(1, as: String.self))"] = try row.decode(2)
        }
        XCTAssertEqual(counts, ["busy running": 3, "waiting pending": 4, "waiting retrying": 1, "failed dead": 2])
        try assertReadsIndexesOnly(AdminStatements.statsActive.sql, name: "stats_active", rows: 20)
    }

    func testListingsOfRunningAndSucceededJobsFindThemThroughTheirIndexes() throws {
        try history()
        func listed(_ state: JobState, queue: String? = nil) throws -> [String] {
            var filter = JobFilter()
            filter.state = state
            filter.queue = queue
            return try connection.run(AdminStatements.listJobs, filter).rows.map {
                "\(try $0.decode(1, as: String.self)) \(try $0.decode(2, as: String.self))"
            }
        }
        XCTAssertEqual(try listed(.running), Array(repeating: "busy running", count: 3))
        XCTAssertEqual(try listed(.succeeded, queue: "done"), Array(repeating: "done succeeded", count: 2))
        XCTAssertEqual(try listed(.succeeded).count, 50)
        XCTAssertEqual(try listed(.dead), Array(repeating: "failed dead", count: 2))

        let arguments = { (state: String, queue: String) in "'\(state)', \(queue), NULL, NULL, NULL, NULL, 50, NULL" }
        try assertReadsIndexesOnly(
            AdminStatements.listJobs.sql, arguments: arguments("running", "NULL"), name: "list_running", rows: 50)
        try assertReadsIndexesOnly(
            AdminStatements.listJobs.sql, arguments: arguments("succeeded", "'done'"), name: "list_done", rows: 50)
        try assertReadsIndexesOnly(
            AdminStatements.listJobs.sql, arguments: arguments("succeeded", "NULL"), name: "list_succeeded", rows: 100)
        try assertReadsIndexesOnly(
            AdminStatements.listJobs.sql, arguments: arguments("dead", "NULL"), name: "list_dead", rows: 50)

        // The console's page of jobs has the same filters.
        var filter = WebJobFilter()
        filter.state = .succeeded
        filter.queue = "done"
        let page = try connection.run(WebStatements.listJobs, .init(filter: filter, before: nil, limit: 50)).rows
        XCTAssertEqual(page.count, 2)
        let pageArguments = { (state: String, queue: String) in
            "'\(state)', \(queue), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 50"
        }
        try assertReadsIndexesOnly(
            WebStatements.listJobs.sql, arguments: pageArguments("succeeded", "'done'"), name: "page_done", rows: 50)
        try assertReadsIndexesOnly(
            WebStatements.listJobs.sql, arguments: pageArguments("running", "NULL"), name: "page_running", rows: 50)
    }

    func testTheDestinationListCountsWaitingAndRunningJobsThroughTheirIndexes() throws {
        try history()
        let rows = try connection.run(
            DestinationStatements.list, .init(host: nil, limit: 100, defaultMaxInFlight: 200)
        ).rows
        var seen: [String: [Int]] = [:]
        for row in rows {
            seen[try row.decode(0)] = [try row.decode(1), try row.decode(2), try row.decode(3)]
        }
        XCTAssertEqual(seen, ["waiting.example": [4, 1, 0], "busy.example": [0, 0, 3]])
        try assertReadsIndexesOnly(
            DestinationStatements.list.sql, arguments: "NULL, 100, 200", name: "destinations", rows: 20)
        try assertReadsIndexesOnly(
            DestinationStatements.list.sql, arguments: "'busy.example', 100, 200", name: "destination", rows: 20)
    }

    func testTheBenchmarksCountOfSucceededJobsReadsTheRetentionIndex() throws {
        try history()
        XCTAssertEqual(try connection.run(BenchStatements.succeededCount, "done")[0].decode(0, as: Int.self), 2)
        try assertReadsIndexesOnly(BenchStatements.succeededCount.sql, arguments: "'done'", name: "bench_done", rows: 20)
    }
}
