import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Errors a newcomer meets first, each one line that says what to do: an unmigrated or older
/// database (exit 4, naming `courier migrate`), no database at all, an unreachable one, a role
/// without privileges, and numbers out of a field's range.
final class GuidingErrorTests: CLITestCase {
    private var extraDatabases: [String] = []

    override func tearDown() {
        for url in extraDatabases { TestDatabase.drop(url) }
        super.tearDown()
    }

    private func run(_ arguments: [String], databaseURL: String?, environment: [String: String] = [:]) throws
        -> CommandResult
    {
        try CourierRunner.run(arguments, databaseURL: databaseURL, environment: environment)
    }

    /// Every command that reads or writes the schema, against a database never migrated.
    func testEveryCommandOnAnUnmigratedDatabaseExits4NamingMigrate() throws {
        let empty = try TestDatabase.createEmpty(label: "unmigrated")
        extraDatabases.append(empty)
        let commands: [[String]] = [
            ["stats"], ["queues", "list"], ["queues"], ["queues", "show", "demo"], ["jobs", "list"], ["jobs", "show", "1"],
            ["jobs", "cancel", "1"], ["dead", "list"], ["destinations", "list"], ["endpoints", "list"],
            ["messages", "list"], ["enqueue", "--url", "https://example.com/x"],
            ["purge", "--state", "dead", "--older-than", "1d", "--yes"],
        ]
        for command in commands {
            let result = try run(command, databaseURL: empty)
            assertFails(result, code: 4, mentioning: "run `courier migrate`")
            XCTAssertTrue(result.stderr.contains("no Courier schema"), "\(command): \(result.stderr)")
        }
        // `migrate` itself is not refused, and afterwards the same command works.
        XCTAssertEqual(try run(["migrate"], databaseURL: empty).status, 0)
        XCTAssertEqual(try run(["stats"], databaseURL: empty).status, 0)
    }

    /// A database an older courier migrated: one line naming `courier migrate`, exit 4.
    func testAnOlderSchemaExits4NamingMigrate() throws {
        let expected = EmbeddedMigrations.all.map(\.version).max() ?? 0
        let url = try TestDatabase.createEmpty(label: "older")
        extraDatabases.append(url)
        let older = try PostgresConnection(url)
        try Migrator(migrations: EmbeddedMigrations.all.filter { $0.version < expected }).migrate(older)
        older.close()
        assertFails(try run(["jobs", "list"], databaseURL: url), code: 4, mentioning: "run `courier migrate`")
    }

    /// No URL, no `COURIER_DATABASE_URL`, no `PG*` variables: the flag and the variable are
    /// named, not libpq's socket error.
    func testNoDatabaseConfiguredNamesTheFlagAndTheVariable() throws {
        var cleared: [String: String] = [:]
        for key in ProcessInfo.processInfo.environment.keys where key.hasPrefix("PG") { cleared[key] = "" }
        let result = try run(["stats"], databaseURL: nil, environment: cleared)
        assertFails(result, code: 2, mentioning: "--database-url")
        XCTAssertTrue(result.stderr.contains("COURIER_DATABASE_URL"), result.stderr)
        XCTAssertFalse(result.stderr.contains("socket"), result.stderr)
    }

    /// Nothing listens on the port: one line with host and port, a hint, and no password.
    func testAnUnreachableDatabaseNamesHostAndPortWithoutThePassword() throws {
        let url = "postgresql://courier:hunter2secret@127.0.0.1:1/courier?connect_timeout=5"
        let result = try run(["stats"], databaseURL: url)
        assertFails(result, code: 1, mentioning: "127.0.0.1")
        XCTAssertTrue(result.stderr.contains("port 1"), result.stderr)
        XCTAssertTrue(result.stderr.contains("COURIER_DATABASE_URL"), result.stderr)
        XCTAssertFalse(result.stderr.contains("hunter2secret"), result.stderr)
    }

    /// A role without Courier's grants: one line naming the role to grant.
    func testARoleWithoutPrivilegesIsToldToGetCourierOperator() throws {
        let role = "nopriv_\(UUID().uuidString.prefix(8).lowercased())"
        try connection.simpleQuery("CREATE ROLE \(role) LOGIN")
        defer { try? connection.simpleQuery("DROP OWNED BY \(role); DROP ROLE \(role)") }
        var parts = URLComponents(string: databaseURL)!
        parts.user = role
        parts.password = nil
        let result = try run(["jobs", "list"], databaseURL: parts.string!)
        assertFails(result, code: 1, mentioning: "courier_operator")
        XCTAssertTrue(result.stderr.contains("permission denied"), result.stderr)
    }

    /// Numbers beyond a field's range are refused in Swift (exit 2, naming the flag and its
    /// range) before any statement; negative priorities parse as values.
    func testEnqueueChecksRangesAndTakesNegativePriorities() throws {
        let url = "https://example.com/hook"
        assertFails(
            try courier("enqueue", "--url", url, "--priority", "9999999999"), code: 2,
            mentioning: "--priority must be between -32768 and 32767")
        assertFails(
            try courier("enqueue", "--url", url, "--max-attempts", "2147483648"), code: 2,
            mentioning: "--max-attempts must be between 1 and 1000")
        assertFails(
            try courier("queues", "set", "default", "--create", "--max-attempts", "5000"), code: 2,
            mentioning: "--max-attempts must be between 1 and 1000")
        XCTAssertEqual(try jobCount, 0)
        let negative = try courier("enqueue", "--url", url, "--priority", "-5")
        XCTAssertEqual(negative.status, 0, negative.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE priority = -5"), 1)
    }

    /// `queues list` (and plain `courier queues`) shows every queue with jobs, finished ones
    /// too, as `stats` and `queues show` do.
    func testQueuesListShowsQueuesWhoseJobsAllFinished() throws {
        try insertJob(state: "succeeded", queue: "alpha")
        try insertJob(state: "dead", queue: "beta")
        try insertJob(state: "pending", queue: "gamma")
        for command in [["queues", "list"], ["queues"]] {
            let result = try courier(command[0], command.count > 1 ? command[1] : "--json")
            XCTAssertEqual(result.status, 0, result.stderr)
            for name in ["alpha", "beta", "gamma"] {
                XCTAssertTrue(result.stdout.contains(name), "\(command): \(result.stdout)")
            }
        }
    }
}
