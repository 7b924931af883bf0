import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0012 applied to a database published into under 0011: every delivery gets its
/// link, and courier.jobs is left with no index that only webhook rows pay for.
final class DeliveriesMigrationTests: XCTestCase {
    func testMigrationLinksEveryDeliveryAndDropsTheJobIndexes() throws {
        let database = try DatabaseBeforeMigration("0012", label: "todeliveries")
        defer { database.drop() }
        let connection = database.connection
        try connection.simpleQuery(
            """
            INSERT INTO courier.endpoints (url, event_types) VALUES ('https://a.example/h', '{*}'), ('https://b.example/h', '{a.*}');
            SELECT courier.publish('a.b', '{"n": 1}');
            SELECT courier.publish('c.d', '{"n": 2}');
            INSERT INTO courier.jobs (queue, url) VALUES ('plain', 'https://c.example/');
            """)
        let before: [[Int64]] = try connection.query(
            "SELECT message_id, id, endpoint_id FROM courier.jobs WHERE message_id IS NOT NULL ORDER BY id"
        ).rows.map { [try $0.decode(0), try $0.decode(1), try $0.decode(2)] }
        XCTAssertEqual(before.count, 3)

        let report = try Migrator(migrations: EmbeddedMigrations.all.filter { $0.fileName < "0013" }).migrate(connection)
        XCTAssertEqual(report.applied, ["0012_deliveries.sql"])
        let links: [[Int64]] = try connection.query(
            "SELECT message_id, job_id, endpoint_id FROM courier.deliveries ORDER BY job_id"
        ).rows.map { [try $0.decode(0), try $0.decode(1), try $0.decode(2)] }
        XCTAssertEqual(links, before)
        XCTAssertEqual(
            try connection.query("SELECT count(*)::int FROM courier.message_deliveries")[0].decode(0, as: Int.self), 3)
        let webhookOnly: [String] = try connection.query(
            """
            SELECT indexname FROM pg_indexes WHERE schemaname = 'courier' AND tablename = 'jobs'
              AND (indexdef LIKE '%message_id%' OR indexdef LIKE '%endpoint_id%')
            """).rows.map { try $0.decode(0) }
        XCTAssertEqual(webhookOnly, [], "claims and outcomes would write these for every webhook row")
    }
}
