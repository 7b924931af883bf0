import Postgres
import XCTest

/// A connection that cannot be made (nothing listens on port 1) says why, never with the
/// password; the redaction of connection strings on its own.
final class FailedConnectTests: XCTestCase {
    func testFailedConnectSaysWhyWithoutThePassword() throws {
        let badURL = "postgresql://nobody:sup3rSecretPw@127.0.0.1:1/none?connect_timeout=2"
        XCTAssertThrowsError(try PostgresConnection(badURL)) { error in
            let text = "\(error)"
            XCTAssertEqual((error as? PostgresError)?.kind, .connectionFailed)
            XCTAssertTrue(text.contains("cannot connect to PostgreSQL"), text)
            XCTAssertFalse(text.contains("sup3rSecretPw"), text)
        }
        XCTAssertEqual(
            PostgresConnection.redacted("postgresql://u:sup3rSecretPw@h/db"), "postgresql://u:***@h/db")
        XCTAssertEqual(PostgresConnection.redacted("host=h password=sup3rSecretPw"), "host=h password=***")
    }
}
