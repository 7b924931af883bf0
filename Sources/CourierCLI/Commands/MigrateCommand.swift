import ArgumentParser
import CourierCore
import Foundation
import Logging
import CourierCLISupport

/// `courier migrate`: applies the embedded migrations.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Create or upgrade the courier schema (safe to run concurrently, idempotent).",
        discussion: """
            Applies the SQL files compiled into this binary, in order, each in a
            transaction, under an advisory lock. A file changed after it was applied is
            refused.

            Examples:
              courier migrate --database-url postgresql://courier@db/courier
              COURIER_DATABASE_URL=postgresql:///courier courier migrate --json
            """
    )

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let connection = try database.connect(requiringSchema: false)
        defer { connection.close() }
        let report: MigrationReport
        do {
            report = try Migrator(logger: Logger(label: "courier.migrate", factory: { _ in SwiftLogNoOpLogHandler() }))
                .migrate(connection)
        } catch let error as MigrationError {
            throw CLIError(error.message)
        }
        if output.json {
            let object: [String: [String]] = ["applied": report.applied, "already_applied": report.alreadyApplied]
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else if report.applied.isEmpty {
            print("Schema is up to date (\(Output.counted(report.alreadyApplied.count, "migrations")) applied).")
        } else {
            for file in report.applied { print("applied \(file)") }
            print("Schema is up to date (\(Output.counted(report.applied.count + report.alreadyApplied.count, "migrations")) applied).")
        }
    }
}
