import CourierCore
import CourierTesting
import Postgres

/// A throwaway database migrated up to a migration and not through it, and a connection to it:
/// where a migration test writes rows the way an older schema held them, then applies the
/// migration under test. `drop()` closes the connection and drops the database.
struct DatabaseBeforeMigration {
    let url: String
    let connection: PostgresConnection

    /// Applies every embedded migration whose file name sorts before `fileNamePrefix` ("0019").
    init(_ fileNamePrefix: String, label: String) throws {
        url = try TestDatabase.createEmpty(label: label)
        do {
            connection = try PostgresConnection(url)
        } catch {
            TestDatabase.drop(url)
            throw error
        }
        do {
            try Migrator(migrations: EmbeddedMigrations.all.filter { $0.fileName < fileNamePrefix }).migrate(connection)
        } catch {
            connection.close()
            TestDatabase.drop(url)
            throw error
        }
    }

    func drop() {
        connection.close()
        TestDatabase.drop(url)
    }
}
