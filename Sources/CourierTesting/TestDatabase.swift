import CourierCore
import Foundation
import Postgres
import XCTest

/// Throwaway databases for tests, created from `COURIER_TEST_DATABASE_URL`.
///
/// The first request migrates a template database (named after a hash of the migrations, so
/// a changed migration gets a new template); every test database is a copy of it, which takes
/// milliseconds. Without `COURIER_TEST_DATABASE_URL` a test is skipped loudly on a developer's
/// machine and fails under `CI=true`.
public enum TestDatabase {
    /// The server URL from the environment, or a skip (developer) / failure (CI).
    public static func serverURL() throws -> String {
        if let url = ProcessInfo.processInfo.environment["COURIER_TEST_DATABASE_URL"], !url.isEmpty {
            return url
        }
        let message = "COURIER_TEST_DATABASE_URL is not set: run the tests through scripts/test"
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            throw TestSetupError(message: message + " (CI=true: a missing database is a failure)")
        }
        print("warning: SKIPPING database test: \(message)")
        throw XCTSkip(message)
    }

    /// Creates a fresh, migrated database and returns its URL.
    ///
    /// - Parameter label: a hint that ends up in the database name (letters and digits kept).
    public static func create(label: String = "t") throws -> String {
        let server = try serverURL()
        let template = try ensureTemplate(server: server)
        let safeLabel = String(label.lowercased().filter { $0.isLetter || $0.isNumber }.prefix(30))
        let name = "courier_\(safeLabel)_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try PostgresConnection(server)
        defer { admin.close() }
        try admin.simpleQuery("CREATE DATABASE \(try admin.quoteIdentifier(name)) TEMPLATE \(try admin.quoteIdentifier(template))")
        return try url(server, database: name)
    }

    /// A migrated database shared by every test that asks with the same `label` in this process
    /// (created on first use); tests isolate themselves with their own queue names or TRUNCATE.
    public static func shared(label: String) throws -> String {
        try sharedLock.withLock {
            if let url = sharedDatabases[label] { return url }
            let url = try create(label: label)
            sharedDatabases[label] = url
            return url
        }
    }

    private static let sharedLock = NSLock()
    nonisolated(unsafe) private static var sharedDatabases: [String: String] = [:]

    /// Creates a fresh database with nothing in it (for migrator tests).
    public static func createEmpty(label: String = "empty") throws -> String {
        let server = try serverURL()
        let name = "courier_\(label)_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try PostgresConnection(server)
        defer { admin.close() }
        try admin.simpleQuery("CREATE DATABASE \(try admin.quoteIdentifier(name))")
        return try url(server, database: name)
    }

    /// Drops a database made by `create`, ending its remaining sessions.
    public static func drop(_ databaseURL: String) {
        guard let server = try? serverURL(), let name = databaseName(databaseURL),
            let admin = try? PostgresConnection(server)
        else { return }
        defer { admin.close() }
        if let quoted = try? admin.quoteIdentifier(name) {
            try? admin.simpleQuery("DROP DATABASE IF EXISTS \(quoted) WITH (FORCE)")
        }
    }

    private static let templateLock = NSLock()
    nonisolated(unsafe) private static var readyTemplates: Set<String> = []

    private static func ensureTemplate(server: String) throws -> String {
        var hasher = FNV1a()
        for migration in EmbeddedMigrations.all { hasher.add(migration.fileName + migration.sql) }
        let name = "courier_template_\(String(hasher.value, radix: 16))"
        templateLock.lock()
        defer { templateLock.unlock() }
        if readyTemplates.contains(name) { return name }
        let admin = try PostgresConnection(server)
        defer { admin.close() }
        // Several test processes may race to build the template.
        try admin.query("SELECT pg_advisory_lock(4242)")
        defer { _ = try? admin.query("SELECT pg_advisory_unlock(4242)") }
        let exists = try admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]).rowCount > 0
        if !exists {
            let building = name + "_building"
            let quotedBuilding = try admin.quoteIdentifier(building)
            try admin.simpleQuery("DROP DATABASE IF EXISTS \(quotedBuilding)")
            try admin.simpleQuery("CREATE DATABASE \(quotedBuilding)")
            let connection = try PostgresConnection(try url(server, database: building))
            try Migrator().migrate(connection)
            connection.close()
            try admin.simpleQuery("ALTER DATABASE \(quotedBuilding) RENAME TO \(try admin.quoteIdentifier(name))")
        }
        readyTemplates.insert(name)
        return name
    }

    /// The same server URL pointing at another database.
    public static func url(_ server: String, database: String) throws -> String {
        guard var components = URLComponents(string: server), server.contains("://") else {
            // A conninfo string: a later dbname wins.
            return server + " dbname=\(database)"
        }
        components.path = "/" + database
        guard let result = components.string else { throw TestSetupError(message: "cannot rewrite \(server)") }
        return result
    }

    static func databaseName(_ url: String) -> String? {
        if let components = URLComponents(string: url), url.contains("://") {
            let path = components.path.drop { $0 == "/" }
            return path.isEmpty ? nil : String(path)
        }
        return url.split(separator: " ").last { $0.hasPrefix("dbname=") }.map { String($0.dropFirst(7)) }
    }
}

/// A test environment problem (no database under CI, a URL that cannot be rewritten).
public struct TestSetupError: Error, CustomStringConvertible {
    /// What is wrong.
    public let message: String
    public var description: String { message }
}

struct FNV1a {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325
    mutating func add(_ text: String) {
        for byte in text.utf8 {
            value ^= UInt64(byte)
            value = value &* 0x100_0000_01b3
        }
    }
}
