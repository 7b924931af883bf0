import Logging
import Postgres

/// One migration file: a version number (the digits its name starts with) and its SQL.
public struct Migration: Sendable, Equatable {
    /// The number the file name starts with, e.g. 1 for `0001_init.sql`.
    public let version: Int
    /// The file name.
    public let fileName: String
    /// The SQL text.
    public let sql: String

    /// Creates a migration from a file name that starts with its version (`0001_name.sql`).
    public init(fileName: String, sql: String) {
        self.fileName = fileName
        self.sql = sql
        self.version = Int(fileName.prefix { $0.isNumber }) ?? 0
    }

    init(fileName: String, bytes: [UInt8]) {
        self.init(fileName: fileName, sql: String(decoding: bytes, as: UTF8.self))
    }
}

/// What one `Migrator.migrate` call did.
public struct MigrationReport: Sendable, Equatable {
    /// Files applied by this call, in order.
    public var applied: [String]
    /// Files that were already applied before this call.
    public var alreadyApplied: [String]
}

/// Why the migrator refused to run.
public struct MigrationError: Error, CustomStringConvertible, Sendable {
    /// A stable code: `checksum_mismatch`, `unknown_version`, `bad_file`.
    public let code: String
    /// A one-line explanation naming the file.
    public let message: String
    public var description: String { message }
}

/// How a database's schema compares with the migrations this binary carries.
public enum SchemaStatus: Sendable, Equatable {
    /// Every embedded migration is applied and nothing newer.
    case current(version: Int)
    /// No Courier schema at all: `courier migrate` was never run.
    case missing(expected: Int)
    /// Older than this binary: `courier migrate` has files to apply.
    case behind(applied: Int, expected: Int)
    /// Newer than this binary: it was migrated by a later version of Courier.
    case ahead(applied: Int, expected: Int)

    /// True only for `.current`.
    public var isCurrent: Bool {
        if case .current = self { return true }
        return false
    }

    /// One line for an operator, saying what to do.
    public var message: String {
        switch self {
        case .current(let version):
            return "database schema is at version \(version)"
        case .missing(let expected):
            return "the database has no Courier schema (this courier expects version \(expected)); run `courier migrate`"
        case .behind(let applied, let expected):
            return "the database schema is at version \(applied) but this courier expects \(expected); run `courier migrate`"
        case .ahead(let applied, let expected):
            return "the database schema is at version \(applied), newer than this courier (\(expected)); "
                + "upgrade courier before starting workers"
        }
    }
}

/// Applies the migration files in order, once each, recording version and checksum in
/// `courier.schema_migrations`.
///
/// Safe to run from several processes at once: everything happens under a session advisory
/// lock, so a second migrator waits and then finds nothing left to do. Each file is applied in
/// its own transaction together with its bookkeeping row. A file whose checksum differs from
/// the one recorded when it was applied is refused: the database would no longer match the
/// source tree.
public struct Migrator: Sendable {
    /// The advisory lock key (`hashtext('courier.migrate')` would do as well; a constant is clearer).
    public static let advisoryLockKey: Int64 = 0x636F_7572_6965_72  // "courier"

    /// The migrations this migrator applies.
    public let migrations: [Migration]
    private let logger: Logger

    /// Creates a migrator.
    ///
    /// - Parameters:
    ///   - migrations: the files, any order (default: the ones embedded in the binary).
    ///   - logger: receives one info line per applied file.
    public init(migrations: [Migration] = EmbeddedMigrations.all, logger: Logger = Logger(label: "courier.migrate")) {
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.logger = logger
    }

    /// The version of the newest migration this migrator carries.
    public var expectedVersion: Int { migrations.last?.version ?? 0 }

    /// Compares the database's applied migrations with `expectedVersion`, writing nothing.
    public func status(_ connection: PostgresConnection) throws -> SchemaStatus {
        let expected = expectedVersion
        guard try connection.run(MigratorStatements.hasMigrationsTable)[0].decode(0, as: Bool.self) else {
            return .missing(expected: expected)
        }
        let applied: Int? = try connection.run(MigratorStatements.appliedVersion)[0].decode(0)
        guard let applied, applied > 0 else { return .missing(expected: expected) }
        if applied < expected { return .behind(applied: applied, expected: expected) }
        if applied > expected { return .ahead(applied: applied, expected: expected) }
        return .current(version: applied)
    }

    /// Applies every pending migration and returns what was done.
    ///
    /// - Throws: `MigrationError` for a changed or malformed file, `PostgresError` from the server.
    @discardableResult
    public func migrate(_ connection: PostgresConnection) throws -> MigrationReport {
        for migration in migrations where migration.version <= 0 {
            throw MigrationError(code: "bad_file", message: "migration file \(migration.fileName) does not start with a version number")
        }
        try connection.run(MigratorStatements.lock, Self.advisoryLockKey)
        defer { _ = try? connection.run(MigratorStatements.unlock, Self.advisoryLockKey) }
        try connection.simpleQuery(MigratorStatements.bootstrap.sql)

        var recorded: [Int: (name: String, checksum: String)] = [:]
        for row in try connection.run(MigratorStatements.listApplied).rows {
            recorded[try row.decode(0, as: Int.self)] = (try row.decode(1), try row.decode(2))
        }
        var report = MigrationReport(applied: [], alreadyApplied: [])
        for migration in migrations {
            let checksum: String = try connection.run(MigratorStatements.checksum, migration.sql)[0].decode(0)
            if let existing = recorded[migration.version] {
                guard existing.checksum == checksum else {
                    throw MigrationError(
                        code: "checksum_mismatch",
                        message: "migration \(migration.fileName) was changed after it was applied "
                            + "(recorded checksum \(existing.checksum.prefix(12)), file \(checksum.prefix(12))); "
                            + "restore the original file and put the change in a new migration")
                }
                report.alreadyApplied.append(migration.fileName)
                continue
            }
            try connection.transaction { conn in
                try conn.simpleQuery(migration.sql)
                try conn.run(MigratorStatements.record, (migration: migration, checksum: checksum))
            }
            logger.info("applied migration", metadata: ["migration.file": "\(migration.fileName)"])
            report.applied.append(migration.fileName)
        }
        let known = Set(migrations.map(\.version))
        if let unknown = recorded.keys.filter({ !known.contains($0) }).min() {
            logger.warning(
                "database has a migration this binary does not know; it is newer than this build",
                metadata: ["migration.version": "\(unknown)"])
        }
        return report
    }
}
