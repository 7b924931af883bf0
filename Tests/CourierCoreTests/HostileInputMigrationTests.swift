import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0004 applied to a database at 0003 that holds rows the new rules refuse: every row
/// is kept, the ones a worker cannot handle are dead with a reason, and every constraint ends
/// validated.
final class HostileInputMigrationTests: XCTestCase {
    func testMigrationFrom0003KeepsEveryRowAndDeadLettersTheOnesAWorkerCannotHandle() throws {
        let url = try TestDatabase.createEmpty(label: "from0003")
        defer { TestDatabase.drop(url) }
        let connection = try PostgresConnection(url)
        defer { connection.close() }
        try Migrator(migrations: EmbeddedMigrations.all.filter { $0.version <= 3 }).migrate(connection)

        try connection.simpleQuery(
            """
            INSERT INTO courier.queues (name, retry_schedule) VALUES
                ('huge', '{5 seconds, 1000000 years}'), ('fine', '{1 minute}');
            """)
        // name -> (insert values, expected state after, expected last_error fragment or nil)
        let rows: [(name: String, values: String, state: String, error: String?)] = [
            ("healthy", "('fine', 'pending', 'POST', 'https://a.example/ok', '{}', 0, 10, NULL, now(), NULL, NULL, NULL)", "pending", nil),
            ("healthy running",
                "('fine', 'running', 'POST', 'https://a.example/ok', '{}', 1, 10, NULL, now(), 'w', now() + interval '1 minute', NULL)", "running", nil),
            ("port 99999",
                "('fine', 'pending', 'POST', 'https://a.example:99999/', '{}', 0, 10, NULL, now(), NULL, NULL, NULL)",
                "dead", "url port must be a number between 1 and 65535"),
            ("X-\u{DC}n\u{EF}",
                "('fine', 'retrying', 'POST', 'https://a.example/', '{\"X-\u{DC}n\u{EF}\": \"v\"}', 1, 10, NULL, now(), NULL, NULL, NULL)", "dead", "not a legal header name"),
            ("CR LF method",
                "('fine', 'pending', E'GET\\r\\nX: 1', 'https://a.example/', '{}', 0, 10, NULL, now(), NULL, NULL, NULL)", "dead", "method must be an HTTP token"),
            ("headers scalar",
                "('fine', 'pending', 'POST', 'https://a.example/', '\"x\"', 0, 10, NULL, now(), NULL, NULL, NULL)",
                "dead", "headers must be a JSON object of strings"),
            ("headers null",
                "('fine', 'pending', 'POST', 'https://a.example/', 'null', 0, 10, NULL, now(), NULL, NULL, NULL)",
                "dead", "headers must be a JSON object of strings"),
            ("attempt overflow",
                "('fine', 'pending', 'POST', 'https://a.example/', '{}', 2147483647, 10, NULL, now(), NULL, NULL, NULL)", "dead", "attempt 2147483647 is not below max_attempts 10"),
            ("run_at infinity",
                "('fine', 'retrying', 'POST', 'https://a.example/', '{}', 1, 10, NULL, 'infinity', NULL, NULL, NULL)",
                "dead", "run_at infinity is not finite"),
            ("infinite lease",
                "('fine', 'running', 'POST', 'https://a.example/', '{}', 1, 10, NULL, now(), 'w', 'infinity', NULL)",
                "dead", "lease until infinity"),
            ("huge schedule",
                "('fine', 'pending', 'POST', 'https://a.example/', '{}', 0, 10, '{1000000 years}', now(), NULL, NULL, NULL)", "dead", "retry_schedule must hold"),
            ("two problems",
                "('fine', 'pending', 'POST', 'https://a.example:0/', 'null', 0, 10, NULL, 'infinity', NULL, NULL, NULL)", "dead", "url port must be a number between 1 and 65535; run_at infinity"),
            ("succeeded over max",
                "('fine', 'succeeded', 'POST', 'https://a.example/', '{}', 50, 10, NULL, now(), NULL, NULL, now())",
                "succeeded", nil),
            ("cancelled at infinity",
                "('fine', 'cancelled', 'POST', 'https://a.example/', '{}', 0, 10, '{1000000 years}', 'infinity', NULL, NULL, now())", "cancelled", nil),
            ("dead with bad url",
                "('fine', 'dead', 'POST', 'https://a.example:99999/', 'null', 3, 3, NULL, now(), NULL, NULL, now())",
                "dead", "kept as it was"),
        ]
        var ids: [String: Int64] = [:]
        for row in rows {
            ids[row.name] = try connection.query(
                """
                INSERT INTO courier.jobs (queue, state, method, url, headers, attempt, max_attempts, retry_schedule,
                    run_at,
                                          locked_by, locked_until, finished_at)
                VALUES \(row.values) RETURNING id
                """)[0].decode(0)
        }
        try connection.query("UPDATE courier.jobs SET last_error = 'kept as it was' WHERE id = $1",
            [ids["dead with bad url"]!])
        let before = try connection.query("SELECT count(*) FROM courier.jobs")[0].decode(0, as: Int.self)
        XCTAssertEqual(before, rows.count)

        let report = try Migrator().migrate(connection)
        XCTAssertEqual(report.applied, EmbeddedMigrations.all.filter { $0.version > 3 }.map(\.fileName))
        XCTAssertEqual(report.applied.first, "0004_hostile_input.sql")

        XCTAssertEqual(
            try connection.query("SELECT array_agg(id ORDER BY id)::text FROM courier.jobs")[0].decode(0,
                as: String.self),
            "{" + ids.values.sorted().map(String.init).joined(separator: ",") + "}",
            "every row is kept")
        for row in rows {
            let id = ids[row.name]!
            let result = try connection.query(
                """
                SELECT state::text, last_error, attempt BETWEEN 0 AND max_attempts, isfinite(run_at),
                       locked_until IS NULL OR isfinite(locked_until), finished_at IS NOT NULL
                FROM courier.jobs WHERE id = $1
                """, [id])[0]
            XCTAssertEqual(try result.decode(0, as: String.self), row.state, row.name)
            let lastError: String? = try result.decode(1)
            if let expected = row.error {
                XCTAssertTrue(lastError?.contains(expected) == true, "\(row.name): \(lastError ?? "nil")")
            } else {
                XCTAssertNil(lastError, row.name)
            }
            XCTAssertEqual(try result.decode(2, as: Bool.self), true, row.name)
            XCTAssertEqual(try result.decode(3, as: Bool.self), true, row.name)
            XCTAssertEqual(try result.decode(4, as: Bool.self), true, row.name)
        }
        XCTAssertEqual(
            try connection.query("SELECT attempt FROM courier.jobs WHERE id = $1",
                [ids["attempt overflow"]!])[0].decode(0, as: Int.self),
            10)
        XCTAssertTrue(
            try connection.query("SELECT last_error FROM courier.jobs WHERE id = $1", [ids["port 99999"]!])[0]
                .decode(0, as: String.self).hasPrefix("refused by migration 0004"))
        XCTAssertEqual(
            try connection.query("SELECT retry_schedule::text FROM courier.queues WHERE name = 'huge'")[0].decode(0,
                as: String.self),
            #"{00:00:05,"30 days"}"#)
        XCTAssertEqual(
            try connection.query(
                """
                SELECT count(*) FROM pg_constraint
                WHERE conrelid IN ('courier.jobs'::regclass, 'courier.queues'::regclass) AND NOT convalidated
                """)[0].decode(0, as: Int.self),
            0, "every constraint is validated")
    }

    func testConcurrentMigrationsOfSeveralDatabasesShareTheRoles() throws {
        // Roles are cluster-wide: each database's migration finds them (or creates them) and goes on.
        let urls = try (0..<3).map { _ in try TestDatabase.createEmpty(label: "roles") }
        defer { urls.forEach(TestDatabase.drop) }
        let failures = ResultCollector()
        DispatchQueue.concurrentPerform(iterations: urls.count) { index in
            do {
                let connection = try PostgresConnection(urls[index])
                defer { connection.close() }
                try Migrator().migrate(connection)
            } catch {
                failures.add("\(error)")
            }
        }
        XCTAssertEqual(failures.all, [])
    }

    func testRoleCreationToleratesAnotherDatabaseCreatingTheRoleFirst() throws {
        // The race of two databases migrated at once, made deterministic: the migration's own
        // role block (with a test role's name) runs in a transaction that has not committed yet
        // while a second connection runs it too; the second waits for the first, then must see
        // the role as created rather than fail.
        let migration = try XCTUnwrap(EmbeddedMigrations.all.first { $0.fileName == "0004_hostile_input.sql" })
        let start = try XCTUnwrap(migration.sql.range(of: "DO $$\nDECLARE\n    wanted text;"))
        let end = try XCTUnwrap(migration.sql.range(of: "END;\n$$;", range: start.upperBound..<migration.sql.endIndex))
        let role = "courier_test_race_\(UInt32.random(in: 0...UInt32.max))"
        let block = String(migration.sql[start.lowerBound..<end.upperBound]).replacingOccurrences(
            of: "ARRAY['courier_producer', 'courier_worker', 'courier_operator']", with: "ARRAY['\(role)']")
        XCTAssertTrue(block.contains(role))
        let server = try TestDatabase.serverURL()
        let first = try PostgresConnection(server)
        let second = try PostgresConnection(server)
        defer {
            first.close()
            second.close()
            if let admin = try? PostgresConnection(server) {
                _ = try? admin.simpleQuery("DROP ROLE IF EXISTS \(role)")
                admin.close()
            }
        }
        try first.simpleQuery("BEGIN")
        try first.simpleQuery(block)
        let done = DispatchSemaphore(value: 0)
        let outcome = ResultCollector()
        DispatchQueue.global().async {
            do {
                try second.simpleQuery(block)
                outcome.add("ok")
            } catch {
                outcome.add("\(error)")
            }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 1), .timedOut, "the second CREATE ROLE should wait for the first")
        try first.simpleQuery("COMMIT")
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(outcome.all, ["ok"])
        XCTAssertEqual(try first.query("SELECT count(*) FROM pg_roles WHERE rolname = $1", [role])[0].decode(0,
            as: Int.self), 1)
    }
}

private final class ResultCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ item: String) { lock.withLock { items.append(item) } }
    var all: [String] { lock.withLock { items } }
}
