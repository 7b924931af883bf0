import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

final class MigratorTests: XCTestCase {
    func testApplyingTwiceChangesNothing() throws {
        let url = try TestDatabase.createEmpty(label: "migrate")
        defer { TestDatabase.drop(url) }
        let connection = try PostgresConnection(url)
        defer { connection.close() }
        let first = try Migrator().migrate(connection)
        XCTAssertEqual(first.applied, EmbeddedMigrations.all.map(\.fileName))
        let schemaBefore = try schemaFingerprint(connection)
        let second = try Migrator().migrate(connection)
        XCTAssertEqual(second.applied, [])
        XCTAssertEqual(second.alreadyApplied, EmbeddedMigrations.all.map(\.fileName))
        XCTAssertEqual(try schemaFingerprint(connection), schemaBefore)
        XCTAssertEqual(
            try connection.query("SELECT count(*) FROM courier.schema_migrations")[0].decode(0, as: Int.self),
            EmbeddedMigrations.all.count)
    }

    func testConcurrentMigratorsDoNotCollide() throws {
        let url = try TestDatabase.createEmpty(label: "concurrent")
        defer { TestDatabase.drop(url) }
        let results = ResultBox()
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            do {
                let connection = try PostgresConnection(url)
                defer { connection.close() }
                results.add(.success(try Migrator().migrate(connection).applied.count))
            } catch {
                results.add(.failure(error))
            }
        }
        let counts = try results.all.map { try $0.get() }
        XCTAssertEqual(counts.sorted(), [0, 0, 0, EmbeddedMigrations.all.count])
    }

    func testChangedChecksumIsRefused() throws {
        let url = try TestDatabase.createEmpty(label: "checksum")
        defer { TestDatabase.drop(url) }
        let connection = try PostgresConnection(url)
        defer { connection.close() }
        let original = Migration(fileName: "0001_x.sql", sql: "CREATE TABLE courier_x (id int);")
        try Migrator(migrations: [original]).migrate(connection)
        let edited = Migration(fileName: "0001_x.sql", sql: "CREATE TABLE courier_x (id bigint);")
        XCTAssertThrowsError(try Migrator(migrations: [edited]).migrate(connection)) { error in
            let migrationError = error as? MigrationError
            XCTAssertEqual(migrationError?.code, "checksum_mismatch")
            XCTAssertTrue(migrationError?.message.contains("0001_x.sql") == true)
        }
    }

    func testAFailingMigrationLeavesNothingBehind() throws {
        let url = try TestDatabase.createEmpty(label: "failing")
        defer { TestDatabase.drop(url) }
        let connection = try PostgresConnection(url)
        defer { connection.close() }
        let broken = Migration(fileName: "0001_broken.sql", sql: "CREATE TABLE courier_y (id int); SELEC 1;")
        XCTAssertThrowsError(try Migrator(migrations: [broken]).migrate(connection))
        XCTAssertEqual(try connection.query("SELECT to_regclass('courier_y') IS NULL")[0].decode(0, as: Bool.self), true)
        XCTAssertEqual(try connection.query("SELECT count(*) FROM courier.schema_migrations")[0].decode(0, as: Int.self), 0)
    }

    private func schemaFingerprint(_ connection: PostgresConnection) throws -> [String] {
        try connection.query(
            """
            SELECT c.relname || ':' || c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'courier' ORDER BY 1
            """
        ).rows.map { try $0.decode(0, as: String.self) }
    }
}

final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Result<Int, any Error>] = []
    func add(_ result: Result<Int, any Error>) { lock.withLock { results.append(result) } }
    var all: [Result<Int, any Error>] { lock.withLock { results } }
}
