import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// The schema-version guard of the commands that serve a database for long (`courier worker`,
/// `courier web`): a database migrated by a later courier, or not yet by this one, is refused
/// at start with exit code 4 and one line saying which version it is and what to do.
final class SchemaVersionGuardTests: CLITestCase {
    /// The newest migration this binary carries.
    private let expected = EmbeddedMigrations.all.map(\.version).max() ?? 0

    private var passwordFiles: [String] = []

    override func tearDown() {
        for path in passwordFiles { try? FileManager.default.removeItem(atPath: path) }
        super.tearDown()
    }

    /// A console password file only its owner may read (so the console warns about nothing).
    private func passwordFile() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("courier-web-\(UUID().uuidString)").path
        guard
            FileManager.default.createFile(
                atPath: path, contents: Data("a long enough password\n".utf8), attributes: [.posixPermissions: 0o600])
        else { throw CocoaError(.fileWriteUnknown, userInfo: ["path": path]) }
        passwordFiles.append(path)
        return path
    }

    /// This test's migrated database as a later courier leaves it: one more migration recorded.
    private func recordAMigrationFromALaterCourier() throws {
        try connection.query(
            "INSERT INTO courier.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            [expected + 1, String(format: "%04d_from_a_later_courier.sql", expected + 1), String(repeating: "0", count: 64)])
    }

    /// A new database with every migration but the newest applied, as an older courier left it.
    private func databaseOneMigrationBehind() throws -> String {
        let url = try TestDatabase.createEmpty(label: "behind")
        let older = try PostgresConnection(url)
        defer { older.close() }
        try Migrator(migrations: EmbeddedMigrations.all.filter { $0.version < expected }).migrate(older)
        XCTAssertEqual(try Migrator().status(older), .behind(applied: expected - 1, expected: expected))
        return url
    }

    /// Runs `courier arguments...` against `databaseURL` like `CourierRunner`, but a command
    /// that starts instead of refusing is killed after 60 s, so the test fails instead of
    /// waiting for a worker that never ends.
    private func run(_ arguments: [String], databaseURL: String) throws -> (status: Int32, stdout: String, stderr: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-guard-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("out")
        let err = directory.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["COURIER_DATABASE_URL"] = databaseURL
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try process.run()
        waitForExit(process, timeout: .seconds(60))
        XCTAssertFalse(process.isRunning, "courier \(arguments.joined(separator: " ")) did not refuse to start")
        return (
            status: process.isRunning ? -1 : process.terminationStatus,
            stdout: String(decoding: try Data(contentsOf: out), as: UTF8.self),
            stderr: String(decoding: try Data(contentsOf: err), as: UTF8.self))
    }

    private var aheadLine: String {
        "error: the database schema is at version \(expected + 1), newer than this courier (\(expected)); "
            + "upgrade courier before starting workers\n"
    }

    private var behindLine: String {
        "error: the database schema is at version \(expected - 1) but this courier expects \(expected); "
            + "run `courier migrate`\n"
    }

    func testWorkerRefusesADatabaseMigratedByALaterCourier() throws {
        try recordAMigrationFromALaterCourier()
        let result = try run(["worker"], databaseURL: databaseURL)
        XCTAssertEqual(result.status, 4, result.stderr)
        XCTAssertEqual(result.stderr, aheadLine)
        XCTAssertEqual(result.stdout, "")
    }

    func testWebRefusesADatabaseMigratedByALaterCourier() throws {
        try recordAMigrationFromALaterCourier()
        let result = try run(["web", "--password-file", try passwordFile()], databaseURL: databaseURL)
        XCTAssertEqual(result.status, 4, result.stderr)
        XCTAssertEqual(result.stderr, aheadLine)
    }

    func testWorkerRefusesADatabaseAMigrationBehindUntilMigrated() throws {
        let behind = try databaseOneMigrationBehind()
        defer { TestDatabase.drop(behind) }
        let refused = try run(["worker"], databaseURL: behind)
        XCTAssertEqual(refused.status, 4, refused.stderr)
        XCTAssertEqual(refused.stderr, behindLine)
        // What the line says to do is what it takes.
        let newest = try XCTUnwrap(EmbeddedMigrations.all.first { $0.version == expected })
        let migrated = try CourierRunner.run(["migrate"], databaseURL: behind)
        XCTAssertEqual(migrated.status, 0, migrated.stderr)
        XCTAssertTrue(migrated.stdout.contains("applied \(newest.fileName)"), migrated.stdout)
        let check = try PostgresConnection(behind)
        defer { check.close() }
        XCTAssertEqual(try Migrator().status(check), .current(version: expected))
    }

    func testWebRefusesADatabaseAMigrationBehind() throws {
        let behind = try databaseOneMigrationBehind()
        defer { TestDatabase.drop(behind) }
        let result = try run(["web", "--password-file", try passwordFile()], databaseURL: behind)
        XCTAssertEqual(result.status, 4, result.stderr)
        XCTAssertEqual(result.stderr, behindLine)
    }
}
