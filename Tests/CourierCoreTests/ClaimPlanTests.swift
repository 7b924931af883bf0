import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// The claim's cost must not depend on the planner's statistics. A table that holds many
/// finished jobs is analyzed rarely (autoanalyze waits for 2 % of it to change), so right after
/// a burst of enqueues the statistics say nothing is due. These tests build exactly that state
/// and read what the claim statements did from `EXPLAIN (ANALYZE, BUFFERS)`: pages touched and
/// whether the statement was compiled, not how long anything took.
final class ClaimPlanTests: OwnDatabaseTestCase {
    override var databaseLabel: String { "claimplan" }

    /// The state a benchmark met: the table was analyzed while 20,000 jobs of the busy host
    /// were due in queue `old` (beside 20,000 finished ones); those were drained and removed,
    /// and a new queue got 20,000 due jobs of the busy host and 3 of a quiet one, not analyzed
    /// since. The statistics say queue `live` has no jobs, so the index of a queue's due jobs
    /// plus a sort looks cheapest, and reads all 20,003 to claim a few.
    private func staleStatistics() throws {
        try connection.simpleQuery(
            """
            INSERT INTO courier.jobs (queue, state, url, attempt, finished_at)
            SELECT 'history', 'succeeded', 'https://busy.example/' || i, 1, now() - interval '1 hour'
            FROM generate_series(1, 20000) AS i;
            INSERT INTO courier.jobs (queue, url) SELECT 'old', 'https://busy.example/' || i FROM generate_series(1, 20000) AS i;
            ANALYZE courier.jobs;
            DELETE FROM courier.jobs WHERE queue = 'old';
            INSERT INTO courier.jobs (queue, url) SELECT 'live', 'https://busy.example/' || i FROM generate_series(1, 20000) AS i;
            INSERT INTO courier.jobs (queue, url) SELECT 'live', 'https://quiet.example/' || i FROM generate_series(1, 3) AS i;
            INSERT INTO courier.destinations (host) VALUES ('busy.example'), ('quiet.example');
            """)
    }

    /// The plan of `sql` run with the claim's settings, in a transaction that is rolled back.
    private func explain(_ statement: String, arguments: String) throws -> [String: Any] {
        prepared += 1
        return try explainRolledBack(
            statement, arguments: arguments, settings: WorkerStatements.claimSettings.sql, name: "plan_\(prepared)")
    }

    private var prepared = 0

    func testClaimingAHostReadsOnlyTheJobsItTakes() throws {
        try staleStatistics()
        for (host, expected) in [("busy.example", 100), ("quiet.example", 3)] {
            let plan = try explain(WorkerStatements.claimBatch.sql, arguments: "'{live}', 'w', 100, 60000, 200, '{\(host)}', '{live}'")
            XCTAssertEqual((plan["Plan"] as? [String: Any])?["Actual Rows"] as? NSNumber, NSNumber(value: expected), host)
            // A claim of 100 handles about 100 rows in each step; reading the queue's 20,003 due
            // jobs (and sorting them) is the plan this guards against.
            XCTAssertLessThanOrEqual(mostRows(plan: plan), 200, "a claim at \(host) handled \(mostRows(plan: plan)) rows")
            XCTAssertNil(plan["JIT"], "the claim was compiled: \(plan["JIT"] ?? "")")
        }
        let running: Int = try connection.query("SELECT count(*) FROM courier.jobs WHERE state = 'running'")[0].decode(0)
        XCTAssertEqual(running, 0, "the explained claims were rolled back")
    }

    func testFindingTheHostsReadsOneHeadPerHostAndIsNeverCompiled() throws {
        try staleStatistics()
        let plan = try explain(WorkerStatements.lockDestinations.sql, arguments: "'{live}', 100, '', ''")
        XCTAssertEqual((plan["Plan"] as? [String: Any])?["Actual Rows"] as? NSNumber, NSNumber(value: 2))
        XCTAssertLessThanOrEqual(mostRows(plan: plan), 10, "finding 2 hosts handled \(mostRows(plan: plan)) rows")
        XCTAssertNil(plan["JIT"], "the host lookup was compiled: \(plan["JIT"] ?? "")")
    }

    /// With 1,000 hosts waiting, a claim of 100 walks about 100 lanes from where the last
    /// claim's round ended, not all 1,000 (one probe and one sort of every host per claim was
    /// most of PostgreSQL's cost per job with many receivers), and the round wraps past the
    /// last host to the first.
    func testFindingHostsAmongAThousandReadsAboutOneClaimsWorth() throws {
        try connection.simpleQuery(
            """
            INSERT INTO courier.jobs (queue, url)
            SELECT 'live', 'https://h' || lpad((i % 1000)::text, 4, '0') || '.example/' || i FROM generate_series(1, 5000) AS i;
            ANALYZE courier.jobs;
            """)
        for (after, first) in [("''", "h0000.example"), ("'h0950.example'", "h0951.example")] {
            let plan = try explain(WorkerStatements.lockDestinations.sql, arguments: "'{live}', 100, \(after), 'live'")
            XCTAssertEqual((plan["Plan"] as? [String: Any])?["Actual Rows"] as? NSNumber, NSNumber(value: 100), after)
            XCTAssertLessThanOrEqual(mostRows(plan: plan), 110, "finding 100 of 1,000 hosts handled \(mostRows(plan: plan)) rows")
            XCTAssertNil(plan["JIT"], "the host lookup was compiled: \(plan["JIT"] ?? "")")
            let cursor = after == "''" ? nil : WorkerStatements.Lane(host: "h0950.example", queue: "live")
            let lanes = try connection.run(
                WorkerStatements.lockDestinations, .init(queues: ["live"], limit: 100, after: cursor)
            ).rows.map { try $0.decode(0, as: String.self) }
            XCTAssertEqual(lanes.first, first, after)
            XCTAssertEqual(Set(lanes).count, 100, after)
            if after != "''" {
                // 49 hosts after the cursor, then round to the first 51.
                XCTAssertEqual(lanes[48], "h0999.example")
                XCTAssertEqual(lanes[49], "h0000.example")
                XCTAssertEqual(lanes.last, "h0050.example")
            }
        }
    }

    /// With 1,000 hosts known, a claim of 100 of them reads their destination rows one probe
    /// per host, never by filtering rows with `host = ANY (hosts)`. `destinations` has not been
    /// analyzed since its rows arrived (a worker's first minutes among new hosts): the generic
    /// plan (`claimSettings`) then scanned all 1,000 rows comparing each with each of the 100
    /// hosts, 2 ms of every claim.
    func testAClaimAmongAThousandHostsNeverComparesEachDestinationWithEachHost() throws {
        let hosts = try thousandUnanalyzedDestinations()
        try connection.simpleQuery(
            """
            INSERT INTO courier.jobs (queue, url)
            SELECT 'live', 'https://h' || lpad(i::text, 4, '0') || '.example/' FROM generate_series(0, 999) AS i;
            ANALYZE courier.jobs;
            """)
        let queues = Array(repeating: "live", count: hosts.count)
        let plan = try explain(
            WorkerStatements.claimBatch.sql,
            arguments: "'{live}', 'w', 100, 60000, 200, '{\(hosts.joined(separator: ","))}', '{\(queues.joined(separator: ","))}'")
        XCTAssertEqual((plan["Plan"] as? [String: Any])?["Actual Rows"] as? NSNumber, NSNumber(value: 100))
        let filters = filtersOn("destinations", plan["Plan"] as? [String: Any] ?? [:])
        XCTAssertFalse(filters.isEmpty, "the plan reads courier.destinations")
        for filter in filters {
            XCTAssertFalse(filter.contains("ANY"), "destination rows filtered by the claim's hosts: \(filter)")
        }
    }

    /// Writing a batch's outcomes at 100 of 1,000 hosts, once the function's plans are the
    /// generic ones a worker runs (after a session's first five calls of each statement), reads
    /// their destination rows by one index probe per host and updates them by tuple id: no
    /// sequential scan of `destinations`, which has not been analyzed since its rows arrived.
    /// With `host = ANY (outcome_hosts)` every call scanned the table twice, comparing every
    /// row with every host. The outcomes are still applied: the last batch's failures count,
    /// its answers reset.
    func testOutcomesAtAHundredOfAThousandHostsNeverScanTheDestinations() throws {
        let hosts = try thousandUnanalyzedDestinations()
        let reasons = PostgresArray(Array(repeating: "", count: 2 * hosts.count))
        var scans = -1
        do {
            try connection.transaction { connection in
                func sequentialScans() throws -> Int {
                    try connection.query(
                        "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'courier.destinations'::regclass"
                    )[0].decode(0)
                }
                var before = 0
                // Even batches all answered (the common path), odd ones fail at the first 50
                // hosts (the other path); from the eleventh on, both paths run generic plans.
                for batch in 0..<14 {
                    if batch == 10 { before = try sequentialScans() }
                    let signals = hosts.indices.map { batch % 2 == 1 && $0 < 50 ? "failed" : "answered" }
                    try connection.query(
                        "SELECT courier.record_destination_outcomes($1, $2, $3)",
                        [PostgresArray(hosts + hosts), PostgresArray(signals + signals), reasons])
                }
                scans = try sequentialScans() - before
                let streaks = try connection.query(
                    "SELECT failure_streak, count(*) FROM courier.destinations WHERE host = ANY ($1) GROUP BY 1 ORDER BY 1",
                    [PostgresArray(hosts)]
                ).rows.map { "\(try $0.decode(0, as: Int.self)): \(try $0.decode(1, as: Int.self))" }
                XCTAssertEqual(streaks, ["0: 50", "2: 50"], "each batch names its hosts twice: two failures after the last answer")
                throw PlanRollBack()
            }
        } catch is PlanRollBack {}
        XCTAssertEqual(scans, 0, "sequential scans of courier.destinations in four batches")
    }

    /// Destination rows of 1,000 hosts (`h0000.example` ...), not analyzed since they arrived;
    /// returns every tenth host, the 100 a batch serves.
    private func thousandUnanalyzedDestinations() throws -> [String] {
        try connection.simpleQuery(
            """
            INSERT INTO courier.destinations (host)
            SELECT 'h' || lpad(i::text, 4, '0') || '.example' FROM generate_series(0, 999) AS i;
            """)
        return (0..<100).map { "h" + String(format: "%04d", $0 * 10) + ".example" }
    }

    /// The filter of every scan of `relation` in the plan, the condition checked row by row
    /// ("" for a scan without one; an index condition is a probe, not a filter).
    private func filtersOn(_ relation: String, _ node: [String: Any]) -> [String] {
        nodes(node).filter { $0["Relation Name"] as? String == relation }.map { $0["Filter"] as? String ?? "" }
    }

    /// Writing a batch of outcomes finds each job by its primary key. The statistics were taken
    /// when no job ran; now 2,100 run, 100 of them this worker's. Trusting the statistics, the
    /// planner walked every running job as the outer side of a nested loop over the batch
    /// (2,100 x 100 rows): the cost of a batch grew with the work of every other worker.
    func testWritingOutcomesReadsOnlyTheirJobs() throws {
        try connection.simpleQuery(
            """
            INSERT INTO courier.jobs (queue, url) SELECT 'live', 'https://busy.example/' || i FROM generate_series(1, 2100) AS i;
            ANALYZE courier.jobs;
            """)
        _ = try JobStore(connection: connection, workerID: "others").claim(
            queues: ["live"], limit: 2000, lease: .seconds(60), perHostLimit: 10_000)
        let mine = try JobStore(connection: connection, workerID: "w").claim(
            queues: ["live"], limit: 100, lease: .seconds(60), perHostLimit: 10_000)
        XCTAssertEqual(mine.count, 100)
        let now = Date()
        let records = mine.map {
            AttemptRecord(
                jobID: $0.id, attempt: $0.attempt, transition: .succeed, delivery: .delivered(), startedAt: now,
                finishedAt: now, host: $0.host)
        }
        // The plan the worker runs after a few batches: the prepared statement's generic one.
        let statement = WorkerStatements.completeBatch
        let literals = statement.arguments((records: records, workerID: "w", endpointDisable: .standard)).map {
            sqlLiteral($0.postgresValue)
        }
        var plan: [String: Any] = [:]
        do {
            try connection.transaction { connection in
                try connection.simpleQuery("SET LOCAL plan_cache_mode = force_generic_plan")
                try connection.simpleQuery("PREPARE outcomes AS " + statement.sql)
                let text: String = try connection.query(
                    "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE outcomes(\(literals.joined(separator: ", ")))"
                )[0].decode(0)
                let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]]
                plan = parsed?.first ?? [:]
                throw PlanRollBack()
            }
        } catch is PlanRollBack {}
        try connection.simpleQuery("DEALLOCATE outcomes")
        XCTAssertLessThanOrEqual(mostRows(plan: plan), 300, "writing 100 outcomes handled \(mostRows(plan: plan)) rows")
        let updates = nodes(plan["Plan"] as? [String: Any] ?? [:]).filter {
            $0["Node Type"] as? String == "ModifyTable" && $0["Operation"] as? String == "Update"
                && $0["Relation Name"] as? String == "jobs"
        }
        XCTAssertEqual(updates.map { ($0["Actual Rows"] as? NSNumber)?.intValue }, [100], "the batch's 100 jobs written")
    }

    /// Another queue's backlog at the same host (a queue other workers serve) and a paused
    /// queue's (paused while its receiver is down) lie ahead of the live queue's jobs in claim
    /// order. A claim of the live queue must not read them, and a claim of every queue must not
    /// read the paused one's.
    private func backlogsAtTheSameHost() throws {
        try connection.simpleQuery(
            """
            INSERT INTO courier.jobs (queue, url) SELECT 'other', 'https://busy.example/' || i FROM generate_series(1, 20000) AS i;
            INSERT INTO courier.jobs (queue, url) SELECT 'held', 'https://busy.example/' || i FROM generate_series(1, 20000) AS i;
            INSERT INTO courier.queues (name, paused) VALUES ('held', true);
            INSERT INTO courier.jobs (queue, url) SELECT 'live', 'https://busy.example/' || i FROM generate_series(1, 5) AS i;
            INSERT INTO courier.destinations (host) VALUES ('busy.example');
            ANALYZE courier.jobs;
            """)
    }

    func testAClaimReadsNoBacklogOfAnotherOrAPausedQueueAtTheSameHost() throws {
        try backlogsAtTheSameHost()
        let hosts = try explain(WorkerStatements.lockDestinations.sql, arguments: "'{live}', 100, '', ''")
        XCTAssertEqual((hosts["Plan"] as? [String: Any])?["Actual Rows"] as? NSNumber, NSNumber(value: 1))
        XCTAssertLessThanOrEqual(mostRows(plan: hosts), 10, "finding the host handled \(mostRows(plan: hosts)) rows")
        let claim = try explain(WorkerStatements.claimBatch.sql, arguments: "'{live}', 'w', 100, 60000, 200, '{busy.example}', '{live}'")
        XCTAssertEqual((claim["Plan"] as? [String: Any])?["Actual Rows"] as? NSNumber, NSNumber(value: 5))
        XCTAssertLessThanOrEqual(mostRows(plan: claim), 20, "claiming 5 jobs handled \(mostRows(plan: claim)) rows")
        let all = try explain(WorkerStatements.claimBatch.sql, arguments: "NULL, 'w', 100, 60000, 200, '{busy.example,busy.example}', '{live,other}'")
        XCTAssertEqual((all["Plan"] as? [String: Any])?["Actual Rows"] as? NSNumber, NSNumber(value: 100))
        XCTAssertLessThanOrEqual(mostRows(plan: all), 300, "claiming 100 jobs handled \(mostRows(plan: all)) rows")

        let store = JobStore(connection: connection, workerID: "w")
        let live = try store.claim(queues: ["live"], limit: 10, lease: .seconds(60))
        XCTAssertEqual(live.map(\.queue), Array(repeating: "live", count: 5))
        let any = try store.claim(queues: nil, limit: 10, lease: .seconds(60))
        XCTAssertEqual(any.map(\.queue), Array(repeating: "other", count: 10), "the paused queue's jobs stay")
        XCTAssertEqual(any.map(\.id), any.map(\.id).sorted(), "in claim order")
    }

    func testAClaimAmongManyHostsTakesRateTokensFromTheLimitedOneOnly() throws {
        // 50 hosts with a due job each; one has a rate limit. `spent` looks up only the hosts
        // `rooms` found limited or probing (fan-out claims of 200 hosts took 200 lookups there
        // to change nothing): the limited host's token is still taken, the others' rows kept.
        try connection.simpleQuery(
            """
            INSERT INTO courier.jobs (queue, url) SELECT 'live', 'https://h' || i || '.example/' FROM generate_series(1, 50) AS i;
            INSERT INTO courier.destinations (host) SELECT 'h' || i || '.example' FROM generate_series(1, 50) AS i;
            UPDATE courier.destinations SET rate_limit = 1000 WHERE host = 'h7.example';
            ANALYZE courier.jobs;
            ANALYZE courier.destinations;
            """)
        let claimed = try JobStore(connection: connection, workerID: "w").claim(
            queues: ["live"], limit: 100, lease: .seconds(60))
        XCTAssertEqual(claimed.count, 50)
        let tokens: Double = try connection.query(
            "SELECT tokens FROM courier.destinations WHERE host = 'h7.example'")[0].decode(0)
        XCTAssertEqual(tokens, 999, accuracy: 1, "the limited host's token was taken")
        let untouched: Int = try connection.query(
            "SELECT count(*)::int FROM courier.destinations WHERE host <> 'h7.example' AND tokens_at IS NULL AND probe_at IS NULL"
        )[0].decode(0)
        XCTAssertEqual(untouched, 49)
    }

    func testTheClaimStillTakesEveryHostsJobsInOrder() throws {
        try staleStatistics()
        let store = JobStore(connection: connection, workerID: "w")
        let claimed = try store.claim(queues: ["live"], limit: 10, lease: .seconds(60))
        XCTAssertEqual(claimed.count, 10)
        XCTAssertEqual(claimed.filter { $0.host == "quiet.example" }.count, 3)
        let busy = claimed.filter { $0.host == "busy.example" }.map(\.id)
        XCTAssertEqual(busy, busy.sorted(), "one host's jobs start in id order")
    }
}
