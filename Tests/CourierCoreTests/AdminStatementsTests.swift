import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

final class AdminStatementsTests: XCTestCase {
    private var connection: PostgresConnection!

    override func setUpWithError() throws {
        connection = try PostgresConnection(try TestDatabase.shared(label: "adminstatements"))
    }

    override func tearDown() {
        connection?.close()
    }

    func testEveryAdminStatementPrepares() throws {
        let statements = [
            AdminStatements.enqueueOne.sql, AdminStatements.listJobs.sql, AdminStatements.showJob.sql, AdminStatements.jobAttempts.sql,
            AdminStatements.cancelJobs.sql, AdminStatements.retryJobsNow.sql, AdminStatements.requeueDeadByID.sql,
            AdminStatements.countDead.sql, AdminStatements.requeueDeadBatch.sql, AdminStatements.countPurgeable.sql,
            AdminStatements.purgeBatch.sql, AdminStatements.listQueues.sql, AdminStatements.setPaused.sql, AdminStatements.setQueue.sql,
            AdminStatements.statsActive.sql, AdminStatements.statsLastHour.sql, AdminStatements.statsLatency.sql,
            AdminStatements.statsEstimate.sql, AdminStatements.pausedQueues.sql, AdminStatements.countCancellable.sql,
            AdminStatements.cancelBatch.sql, AdminStatements.queueExists.sql, AdminStatements.knownQueues.sql,
        ]
        for (index, sql) in statements.enumerated() {
            XCTAssertNoThrow(try connection.prepare(name: "admin_\(index)", sql: sql), sql)
        }
        // The import statements need the session's staging table.
        try connection.transaction { connection in
            try connection.simpleQuery(AdminStatements.createImportTable.sql)
            for (index, sql) in [AdminStatements.importHasProblems.sql, AdminStatements.importProblems.sql,
                                 AdminStatements.dropImportLines.sql, AdminStatements.insertImportUnkeyed.sql,
                                 AdminStatements.insertImportKeyed.sql].enumerated() {
                XCTAssertNoThrow(try connection.prepare(name: "import_\(index)", sql: sql), sql)
            }
        }
    }

    func testImportRejectsExactlyWhatEnqueueRejects() throws {
        let store = AdminStore(connection: connection)
        let queue = "import\(UInt32.random(in: 0...UInt32.max))"
        var good = NewJob(url: "https://example.com/ok")
        good.queue = queue
        var bad = good
        bad.url = "https://example.com/x"
        bad.headers = [("Content-Length", "3")]
        var big = good
        big.body = [UInt8](repeating: 65, count: 1_048_577)
        var key = good
        key.idempotencyKey = ""
        for job in [bad, big, key] {
            XCTAssertThrowsError(try store.enqueue(job), "enqueue must refuse what the import refuses")
        }
        XCTAssertThrowsError(try store.importJobs([[(1, good), (2, bad), (3, big), (4, key), (5, good)]], skipInvalid: false)) { error in
            XCTAssertEqual((error as? ImportRejected)?.problems.map(\.line), [2, 3, 4])
        }
        let report = try store.importJobs([[(1, good), (2, bad)], [(3, big), (4, key), (5, good)]], skipInvalid: true)
        XCTAssertEqual(report.inserted, 2)
        XCTAssertEqual(report.rejected.map(\.line), [2, 3, 4])
    }

    func testImportKeepsEveryByteOfTheBodyAndTheFirstJobOfAKey() throws {
        let store = AdminStore(connection: connection)
        let queue = "bytes\(UInt32.random(in: 0...UInt32.max))"
        var binary = NewJob(url: "https://example.com/bytes")
        binary.queue = queue
        binary.body = (0...255).map { UInt8($0) } + Array(#"\x41 \\ tab\there"#.utf8)
        binary.headers = [("Content-Type", "application/octet-stream"), ("X-Note", "a\\b")]
        var keyed = NewJob(url: "https://example.com/keyed")
        keyed.queue = queue
        keyed.idempotencyKey = "k1"
        var again = keyed
        again.url = "https://example.com/second"
        let report = try store.importJobs([[(1, binary), (2, keyed), (3, again)]], skipInvalid: false)
        XCTAssertEqual(report.inserted, 2)
        XCTAssertEqual(report.duplicates, 1)
        let row = try connection.query(
            "SELECT body, headers->>'X-Note' FROM courier.jobs WHERE queue = $1 AND url = $2", [queue, binary.url])[0]
        XCTAssertEqual(try row.decode(0, as: [UInt8].self), binary.body)
        XCTAssertEqual(try row.decode(1, as: String.self), "a\\b")
        XCTAssertEqual(
            try connection.query("SELECT url FROM courier.jobs WHERE queue = $1 AND idempotency_key = 'k1'", [queue])[0]
                .decode(0, as: String.self), keyed.url)
    }
}
