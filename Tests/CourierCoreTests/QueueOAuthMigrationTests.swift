import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0008 applied to a database of the schema before it: queues and attempt rows are
/// kept as they were, old attempt rows are not in-process ones, and the new checks hold.
final class QueueOAuthMigrationTests: XCTestCase {
    func testMigrationKeepsRowsAndGuardsTheNewColumns() throws {
        let database = try DatabaseBeforeMigration("0008", label: "tooauth")
        defer { database.drop() }
        let connection = database.connection
        try connection.simpleQuery(
            """
            INSERT INTO courier.queues (name, signing_secret, max_attempts) VALUES ('billing', 'whsec_AAAA', 4);
            INSERT INTO courier.jobs (queue, state, url, attempt, finished_at) VALUES ('billing', 'succeeded', 'https://a.example/', 1, now());
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, worker)
            SELECT id, 1, now(), now(), 3, 200, 'w' FROM courier.jobs;
            """)
        // Up to 0008 only: later migrations are not this test's subject.
        let report = try Migrator(migrations: EmbeddedMigrations.all.filter { $0.fileName < "0009" }).migrate(connection)
        XCTAssertEqual(report.applied, ["0008_queue_oauth.sql"])
        XCTAssertEqual(
            try connection.query(
                "SELECT count(*) FROM courier.attempts WHERE NOT in_process"
            )[0].decode(0, as: Int.self), 1)
        XCTAssertEqual(
            try connection.query(
                """
                SELECT count(*) FROM courier.queues WHERE name = 'billing' AND signing_secret = 'whsec_AAAA'
                AND max_attempts = 4 AND oauth_token_url IS NULL AND oauth_client_secret IS NULL
                """)[0].decode(0, as: Int.self), 1)
        for bad in [
            "UPDATE courier.queues SET oauth_token_url = 'https://id.example/t'",
            "UPDATE courier.queues SET oauth_token_url = 'ftp://id.example/t', oauth_client_id = 'c', oauth_client_secret = 's'",
            "UPDATE courier.queues SET oauth_scope = 'x'",
            "UPDATE courier.queues SET oauth_token_url = 'https://id.example/t', oauth_client_id = 'c', oauth_client_secret = E'line\\nbreak'",
        ] {
            XCTAssertThrowsError(try connection.query(bad), bad) { error in
                XCTAssertEqual((error as? PostgresError)?.sqlState, "23514", "\(bad): \(error)")
            }
        }
        XCTAssertEqual(
            try connection.query(
                """
                UPDATE courier.queues SET oauth_token_url = 'https://id.example/t', oauth_client_id = 'c',
                    oauth_client_secret = 's', oauth_scope = 'a b'
                """).affectedRows, 1)
    }
}
