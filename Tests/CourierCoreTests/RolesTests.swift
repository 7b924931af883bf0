import CourierCore
import CourierTesting
import Foundation
import Postgres
import RetryClient
import XCTest

/// Migration 0004's roles: a login role that is a member of `courier_producer`,
/// `courier_worker` or `courier_operator` can do its job and nothing more.
final class RolesTests: XCTestCase {
    private var databaseURL: String!
    private var owner: PostgresConnection!
    private var createdRoles: [String] = []
    private var openConnections: [PostgresConnection] = []

    override func setUpWithError() throws {
        databaseURL = try TestDatabase.create(label: "roles")
        owner = try PostgresConnection(databaseURL)
    }

    override func tearDown() {
        openConnections.forEach { $0.close() }
        if let owner {
            for role in createdRoles {
                _ = try? owner.simpleQuery("DROP ROLE IF EXISTS \(role)")
            }
            owner.close()
        }
        if let databaseURL { TestDatabase.drop(databaseURL) }
    }

    /// Creates a LOGIN role (unique name, dropped in tearDown) in `group` and connects as it.
    private func connect(as group: String) throws -> PostgresConnection {
        let role = "courier_test_\(group.dropFirst("courier_".count))_\(UInt32.random(in: 0...UInt32.max))"
        try owner.simpleQuery("CREATE ROLE \(role) LOGIN; GRANT \(group) TO \(role)")
        createdRoles.append(role)
        let connection = try PostgresConnection(try Self.url(databaseURL, user: role))
        openConnections.append(connection)
        return connection
    }

    private static func url(_ databaseURL: String, user: String) throws -> String {
        guard databaseURL.contains("://"), var components = URLComponents(string: databaseURL) else {
            return databaseURL + " user=\(user)"
        }
        components.user = user
        components.password = nil
        return try XCTUnwrap(components.string)
    }

    private func assertRefused(
        _ connection: PostgresConnection, _ sql: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try connection.simpleQuery(sql), sql, file: file, line: line) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "42501", "\(sql): \(error)", file: file, line: line)
        }
    }

    func testRolesExistAndCannotLogIn() throws {
        let rows = try owner.query(
            "SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname LIKE 'courier\\_%' AND rolname NOT LIKE 'courier\\_test\\_%' ORDER BY 1"
        ).rows
        XCTAssertEqual(try rows.map { try $0.decode(0, as: String.self) }, ["courier_operator", "courier_producer",
            "courier_worker"])
        XCTAssertEqual(try rows.map { try $0.decode(1, as: Bool.self) }, [false, false, false])
    }

    func testProducerEnqueuesAndReadsStatusButNoSecretsHeadersOrBodies() throws {
        try owner.query(
            "INSERT INTO courier.queues (name, signing_secret) VALUES ('signed', 'whsec_c2VjcmV0c2VjcmV0c2VjcmV0')")
        let listener = try PostgresConnection(databaseURL)
        defer { listener.close() }
        try listener.listen(WorkerStatements.wakeChannel)
        let producer = try connect(as: "courier_producer")

        let id: Int64 = try producer.query(
            "SELECT courier.enqueue(url => 'https://a.example/x', payload => '{\"card\": \"4242\"}', queue => 'signed', headers => '{\"Authorization\": \"Bearer t\"}')"
        )[0].decode(0)
        let raw: Int64 = try producer.query(
            "SELECT courier.enqueue_raw(url => 'https://a.example/y', body => $1)", [[UInt8]([1, 2, 3])])[0].decode(0)
        // The NOTIFY trigger still runs when the producer inserts through the SECURITY DEFINER function.
        var payloads: [String] = []
        for _ in 0..<10 where payloads.count < 2 {
            payloads += try listener.waitForNotifications(timeout: .seconds(1)).map(\.payload)
        }
        XCTAssertEqual(payloads.sorted(), ["default", "signed"])
        // Validation applies to producers as to everyone.
        XCTAssertThrowsError(try producer.query("SELECT courier.enqueue(url => 'https://a.example:0/', payload => '{}')")) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "22023")
        }

        let status = try producer.query("SELECT id, state::text FROM courier.job_status ORDER BY id")
        XCTAssertEqual(try status.rows.map { try $0.decode(0, as: Int64.self) }, [id, raw])
        XCTAssertEqual(try status.rows.map { try $0.decode(1, as: String.self) }, ["pending", "pending"])
        XCTAssertEqual(Set(status.columns), ["id", "state"])
        let viewColumns = try producer.query("SELECT * FROM courier.job_status LIMIT 0").columns
        for hidden in ["url", "headers", "body", "method", "locked_by", "signing_secret"] {
            XCTAssertFalse(viewColumns.contains(hidden), "job_status shows \(hidden)")
        }

        for sql in [
            "SELECT headers FROM courier.jobs",
            "SELECT body FROM courier.jobs",
            "SELECT id FROM courier.jobs",
            "SELECT signing_secret FROM courier.queues",
            "SELECT oauth_client_secret FROM courier.queues",
            "SELECT name FROM courier.queues",
            "SELECT error FROM courier.attempts",
            "INSERT INTO courier.jobs (url) VALUES ('https://a.example/')",
            "UPDATE courier.jobs SET state = 'cancelled', finished_at = now()",
            "DELETE FROM courier.jobs",
            "INSERT INTO courier.queues (name, paused) VALUES ('x', true)",
            "UPDATE courier.queues SET signing_secret = NULL",
            "INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, worker) VALUES (\(id), 1, now(), now(), 0, 'x')",
            "TRUNCATE courier.jobs CASCADE",
        ] {
            assertRefused(producer, sql)
        }
        XCTAssertEqual(try owner.query("SELECT count(*) FROM courier.jobs")[0].decode(0, as: Int.self), 2)
    }

    func testSecurityDefinerFunctionsPinTheirSearchPath() throws {
        let rows = try owner.query(
            """
            SELECT p.proname, p.prosecdef, coalesce(array_to_string(p.proconfig, ','), '')
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'courier' AND (p.prosecdef OR p.proname IN ('enqueue', 'enqueue_raw'))
            ORDER BY 1
            """
        ).rows
        XCTAssertEqual(
            try rows.map { try $0.decode(0, as: String.self) },
            ["count_jobs_deleted", "count_jobs_inserted", "count_jobs_truncated", "count_jobs_updated",
             "endpoint_follow", "endpoints_check", "enqueue", "enqueue_raw", "fold_job_counts", "jobs_delete_attempts",
             "publish", "record_endpoint_outcomes"])
        for row in rows {
            XCTAssertEqual(try row.decode(1, as: Bool.self), true)
            XCTAssertEqual(try row.decode(2, as: String.self), "search_path=pg_catalog, pg_temp")
        }
        // A role without the producer's grant cannot call them.
        let outsider = "courier_test_outsider_\(UInt32.random(in: 0...UInt32.max))"
        try owner.simpleQuery("CREATE ROLE \(outsider) LOGIN")
        createdRoles.append(outsider)
        let connection = try PostgresConnection(try Self.url(databaseURL, user: outsider))
        openConnections.append(connection)
        assertRefused(connection, "SELECT courier.enqueue(url => 'https://a.example/', payload => '{}')")
        assertRefused(connection, "SELECT courier.fold_job_counts()")
    }

    func testWorkerRunsEveryWorkerStatementAndCannotRewriteRequests() throws {
        let queue = "work"
        try owner.query(
            """
            INSERT INTO courier.queues (name, retry_schedule, signing_secret, oauth_token_url, oauth_client_id,
                                        oauth_client_secret, oauth_scope)
            VALUES ($1, '{1 second}', 'whsec_AAAA', 'https://id.example/token', 'cid', 'csecret', 'hooks')
            """, [queue])
        for i in 0..<4 {
            try owner.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2, max_attempts => 2)",
                    ["https://a.example/\(i)", queue])
        }
        let worker = try connect(as: "courier_worker")
        for (index, sql) in [
            WorkerStatements.claimBatch.sql, WorkerStatements.claimCandidates.sql, WorkerStatements.claimOne.sql,
            WorkerStatements.quarantineDue.sql, WorkerStatements.quarantineRunning.sql, WorkerStatements.completeBatch.sql,
            WorkerStatements.heartbeat.sql, WorkerStatements.release.sql, WorkerStatements.tryMaintenanceLock.sql,
            WorkerStatements.rescueExpired.sql, WorkerStatements.deleteExpiredFinished.sql, WorkerStatements.queueDepth.sql,
        ].enumerated() {
            XCTAssertNoThrow(try worker.prepare(name: "worker_\(index)", sql: sql), sql)
        }
        try worker.listen(WorkerStatements.wakeChannel)
        // The startup check of the schema version.
        XCTAssertEqual(try Migrator().status(worker), .current(version: Migrator().expectedVersion))

        let store = JobStore(connection: worker, workerID: "w-role")
        let claimed = try store.claim(queues: [queue], limit: 4, lease: .seconds(30))
        XCTAssertEqual(claimed.count, 4)
        XCTAssertEqual(claimed.first?.signingSecret, "whsec_AAAA")
        XCTAssertEqual(
            claimed.first?.oauth,
            OAuth2ClientCredentials(tokenURL: "https://id.example/token", clientID: "cid", clientSecret: "csecret", scope: "hooks"))
        XCTAssertFalse("\(claimed[0])".contains("csecret"), "a claimed job prints without its OAuth secret")
        XCTAssertEqual(try store.heartbeat(claimed.map(\.id), lease: .seconds(30)).count, 4)
        XCTAssertEqual(try store.release([(claimed[3].id, claimed[3].attempt)], delay: .zero), 1)
        let now = Date()
        let results: [Delivery] = [
            .delivered(status: 200), .response(status: 503, error: "HTTP 503"),
            .response(status: 400, error: "HTTP 400"),
        ]
        let records = zip(claimed, results).map { job, result in
            AttemptRecord(
                jobID: job.id, attempt: job.attempt,
                transition: JobTransition.decide(result, attempt: job.attempt, maxAttempts: job.maxAttempts,
                                                 schedule: job.schedule, random: 0.5),
                delivery: { var d = result; d.responseExcerpt = "ok"; return d }(), startedAt: now, finishedAt: now)
        }
        XCTAssertEqual(try store.recordOutcomes(records).changed.count, 3)
        // Rescue of an expired lease and retention of old successes, as the maintenance pass runs them.
        let again = try store.claim(queues: [queue], limit: 1, lease: .seconds(30))
        XCTAssertEqual(again.count, 1)
        try owner.query("UPDATE courier.jobs SET locked_until = now() - interval '1 second' WHERE id = $1",
            [again[0].id])
        try owner.query("UPDATE courier.jobs SET finished_at = now() - interval '30 days' WHERE state = 'succeeded'")
        let report = try XCTUnwrap(try store.maintain(keepingSucceeded: .seconds(86_400), lease: .milliseconds(1)))
        XCTAssertEqual(report.rescuedToRetrying + report.rescuedToDead, 1)
        XCTAssertEqual(report.deletedSucceeded, 1)
        XCTAssertEqual(try store.queueDepth(queues: [queue]).map(\.queue), [queue])
        // The isolation path: one job claimed alone, and rows moved to the dead letters.
        let candidates = try worker.query(WorkerStatements.claimCandidates.sql, [PostgresArray([queue]), 10])
        XCTAssertGreaterThan(candidates.rowCount, 0)
        let candidate: Int64 = try candidates[0].decode(0)
        let alone = try worker.query(WorkerStatements.claimOne.sql, [candidate, "w-role", 30_000])
        XCTAssertEqual(alone.rowCount, 1)
        let attempt: Int = try alone[0].decode(6)
        XCTAssertEqual(
            try worker.query(WorkerStatements.quarantineRunning.sql, [candidate, attempt, "w-role", "unreadable row"])
                .affectedRows, 1)
        try owner.query(
            "UPDATE courier.jobs SET state = 'pending', finished_at = NULL, attempt = 0 WHERE id = $1", [candidate])
        XCTAssertEqual(try worker.query(WorkerStatements.quarantineDue.sql, [candidate, "unclaimable row"]).affectedRows, 1)

        for sql in [
            "UPDATE courier.jobs SET url = 'https://evil.example/'",
            "UPDATE courier.jobs SET headers = '{}'",
            "UPDATE courier.jobs SET body = NULL",
            "INSERT INTO courier.jobs (url) VALUES ('https://a.example/')",
            "UPDATE courier.queues SET paused = true",
            "SELECT courier.enqueue(url => 'https://a.example/', payload => '{}')",
        ] {
            assertRefused(worker, sql)
        }
    }

    func testOperatorRunsEveryAdminStatement() throws {
        let operatorConnection = try connect(as: "courier_operator")
        for (index, sql) in [
            AdminStatements.enqueueOne.sql, AdminStatements.listJobs.sql, AdminStatements.showJob.sql, AdminStatements.jobAttempts.sql,
            AdminStatements.cancelJobs.sql, AdminStatements.retryJobsNow.sql, AdminStatements.requeueDeadByID.sql,
            AdminStatements.countDead.sql, AdminStatements.requeueDeadBatch.sql, AdminStatements.countPurgeable.sql,
            AdminStatements.purgeBatch.sql, AdminStatements.listQueues.sql, AdminStatements.setPaused.sql, AdminStatements.setQueue.sql,
            AdminStatements.setQueueOAuth.sql,
            AdminStatements.statsActive.sql, AdminStatements.statsLastHour.sql, AdminStatements.statsLatency.sql,
            AdminStatements.statsEstimate.sql, AdminStatements.pausedQueues.sql, AdminStatements.countCancellable.sql,
            AdminStatements.cancelBatch.sql, AdminStatements.queueExists.sql, AdminStatements.knownQueues.sql,
        ].enumerated() {
            XCTAssertNoThrow(try operatorConnection.prepare(name: "admin_\(index)", sql: sql), sql)
        }
        let store = AdminStore(connection: operatorConnection)
        var job = NewJob(url: "https://a.example/op")
        job.queue = "ops"
        let first = try store.enqueue(job)
        let report = try store.importJobs([[(1, job), (2, job)]], skipInvalid: false)
        XCTAssertEqual(report.inserted, 2)
        XCTAssertEqual(try store.listJobs(JobFilter()).count, 3)
        XCTAssertNotNil(try store.job(first))
        XCTAssertEqual(try store.retryNow([first]).map(\.changed), [true])
        XCTAssertEqual(try store.cancel([first]).map(\.changed), [true])
        try owner.query("UPDATE courier.jobs SET state = 'dead', finished_at = now() - interval '2 days' WHERE id <> $1", [first])
        XCTAssertEqual(try store.countDead({ var f = DeadJobFilter(); f.queue = "ops"; return f }()).count, 2)
        let dead = try store.listJobs({ var f = JobFilter(); f.state = .dead; return f }()).map(\.id)
        XCTAssertEqual(try store.requeueDead([dead[0]]).map(\.changed), [true])
        XCTAssertEqual(try store.requeueDead({ var f = DeadJobFilter(); f.queue = "ops"; return f }(), maxID: Int64.max,
            batchSize: 10), 1)
        try store.setPaused("ops", true)
        var change = QueueSettingsChange()
        change.maxAttempts = .some(5)
        change.retrySchedule = .some([.seconds(1), .seconds(60)])
        try store.update("ops", change)
        XCTAssertEqual(try store.queues().first { $0.name == "ops" }?.maxAttempts, 5)
        _ = try store.stats()
        try owner.query("UPDATE courier.jobs SET state = 'cancelled', finished_at = now() - interval '2 days'")
        XCTAssertEqual(try store.countPurgeable(state: .cancelled, olderThan: Date(), queue: nil), 3)
        XCTAssertEqual(try store.purge(state: .cancelled, olderThan: Date(), queue: nil, batchSize: 10), 3)
        // The operator too goes through the table guards.
        XCTAssertThrowsError(try operatorConnection.query("INSERT INTO courier.jobs (url) VALUES ('https://a.example:0/')")) { error in
            XCTAssertEqual((error as? PostgresError)?.sqlState, "22023")
        }
    }
}
