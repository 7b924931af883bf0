import CourierTesting
import Postgres
import XCTest

/// A test case with a fresh migrated database per test, for tests whose statements act on
/// every queue (retention, counts) and so cannot share a database with other tests.
class OwnDatabaseTestCase: XCTestCase {
    var url = ""
    var connection: PostgresConnection!

    /// The label in the database's name.
    var databaseLabel: String { "own" }

    override func setUpWithError() throws {
        url = try TestDatabase.create(label: databaseLabel)
        connection = try PostgresConnection(url)
    }

    override func tearDown() {
        connection?.close()
        if !url.isEmpty { TestDatabase.drop(url) }
    }
}
