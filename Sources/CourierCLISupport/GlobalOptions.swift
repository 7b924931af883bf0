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

    /// Opens a connection, turning a failure into one clear line without the password.
    public func connect() throws -> PostgresConnection {
        do {
            return try PostgresConnection(resolvedURL, applicationName: "courier-cli")
        } catch let error as PostgresError {
            // libpq quotes pieces of a connection string it cannot parse, password included.
            throw CLIError(Redaction.connectionError(error.message, conninfo: resolvedURL))
        }
    }
}

/// `--json` for machine-readable output.
public struct OutputOptions: ParsableArguments, Sendable {
    /// Print JSON instead of human output.
    @Flag(name: .long, help: "Print JSON for scripts instead of human output.")
    public var json = false

    public init() {}
}
