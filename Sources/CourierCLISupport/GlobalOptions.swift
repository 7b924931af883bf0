import ArgumentParser
import CourierCore
import Foundation
import Postgres

/// Options every database command takes.
public struct DatabaseOptions: ParsableArguments, Sendable {
    /// The database to use.
    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "PostgreSQL URI or conninfo (default: $COURIER_DATABASE_URL, then libpq's PG* variables).",
            valueName: "url"))
    public var databaseURL: String?

    public init() {}

    /// The connection string to use: the flag, then `COURIER_DATABASE_URL`, then "" (libpq
    /// then reads `PGHOST`, `PGDATABASE`, ...).
    public var resolvedURL: String {
        if let databaseURL, !databaseURL.isEmpty { return databaseURL }
        return ProcessInfo.processInfo.environment["COURIER_DATABASE_URL"] ?? ""
    }

    /// Opens a connection, turning a failure into one clear line without the password, and
    /// checks that the database carries the schema this binary expects.
    ///
    /// - Parameter requiringSchema: false only for commands that create the schema
    ///   (`courier migrate`); every other command is refused with exit code 4 and a line naming
    ///   `courier migrate` when the database was never migrated or is older than this binary.
    ///   A newer schema is accepted here (`courier worker` and `courier web` refuse it).
    public func connect(requiringSchema: Bool = true) throws -> PostgresConnection {
        let url = resolvedURL
        if url.isEmpty && !Self.environmentNamesDatabase(ProcessInfo.processInfo.environment) {
            throw CLIError.usage(
                "no database given: pass --database-url or set COURIER_DATABASE_URL "
                    + "(e.g. postgresql://courier@localhost/courier)")
        }
        let connection: PostgresConnection
        do {
            connection = try PostgresConnection(url, applicationName: "courier-cli")
        } catch let error as PostgresError {
            // libpq quotes pieces of a connection string it cannot parse, password included.
            let reason = Redaction.connectionError(error.message, conninfo: url)
            guard error.kind == .connectionFailed else { throw CLIError(reason) }
            throw CLIError(
                "cannot connect to the database: \(reason); check that PostgreSQL runs at that address "
                    + "and that --database-url or COURIER_DATABASE_URL names it")
        }
        guard requiringSchema else { return connection }
        do {
            let status = try Migrator().status(connection)
            switch status {
            case .missing, .behind:
                connection.close()
                throw CLIError(status.message, exitCode: .schemaMismatch)
            case .current, .ahead:
                return connection
            }
        } catch {
            connection.close()
            throw error
        }
    }

    /// Whether libpq's environment variables (`PGHOST`, `PGDATABASE`, `PGSERVICE`, ...) say
    /// which database to use when no URL is given.
    package static func environmentNamesDatabase(_ environment: [String: String]) -> Bool {
        let names = ["PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE", "PGSERVICEFILE"]
        return names.contains { !(environment[$0] ?? "").isEmpty }
    }
}

/// `--json` for machine-readable output.
public struct OutputOptions: ParsableArguments, Sendable {
    /// Print JSON instead of human output.
    @Flag(name: .long, help: "Print JSON for scripts instead of human output.")
    public var json = false

    public init() {}
}
