import CourierTesting
import Foundation
import XCTest

/// `courier queues set --oauth-*` / `--no-oauth` and what `queues show|list` say about it.
final class QueueOAuthCommandTests: CLITestCase {
    private let secret = "cl1ent-S3cret-for-tests"

    private func secretFile(_ text: String) throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)")
        try Data(text.utf8).write(to: file)
        addTeardownBlock { try? FileManager.default.removeItem(at: file) }
        return file.path
    }

    private func assertNoSecret(_ result: CommandResult, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(result.stdout.contains(secret), result.stdout, file: file, line: line)
        XCTAssertFalse(result.stderr.contains(secret), result.stderr, file: file, line: line)
    }

    func testSetShowAndRemoveWithoutEverPrintingTheSecret() throws {
        let path = try secretFile(secret + "\n")
        let set = try courier(
            "queues", "set", "partner", "--create", "--oauth-token-url", "https://id.example.com/oauth/token",
            "--oauth-client-id", "courier", "--oauth-client-secret-file", path, "--oauth-scope", "hooks.write")
        XCTAssertEqual(set.status, 0, set.stderr)
        assertNoSecret(set)
        XCTAssertTrue(set.stdout.contains("OAuth: https://id.example.com/oauth/token, client courier, scope hooks.write."), set.stdout)
        XCTAssertEqual(
            try count(
                """
                SELECT count(*) FROM courier.queues WHERE name = 'partner' AND oauth_client_secret = $1
                AND oauth_client_id = 'courier' AND oauth_scope = 'hooks.write' AND oauth_audience IS NULL
                """, [secret]), 1, "the secret is stored trimmed")

        let show = try courier("queues", "show", "partner")
        XCTAssertEqual(show.status, 0, show.stderr)
        assertNoSecret(show)
        XCTAssertTrue(show.stdout.contains("https://id.example.com/oauth/token, client courier"), show.stdout)
        let json = try XCTUnwrap(try courier("queues", "show", "partner", "--json").json() as? [String: Any])
        let oauth = try XCTUnwrap(json["oauth"] as? [String: Any])
        XCTAssertEqual(oauth["token_url"] as? String, "https://id.example.com/oauth/token")
        XCTAssertEqual(oauth["client_id"] as? String, "courier")
        XCTAssertEqual(oauth["scope"] as? String, "hooks.write")
        XCTAssertEqual(Set(oauth.keys), ["token_url", "client_id", "scope", "audience"])
        let listed = try XCTUnwrap(try courier("queues", "list", "--json").json() as? [[String: Any]])
        XCTAssertEqual((listed.first?["oauth"] as? [String: Any])?["client_id"] as? String, "courier")
        for arguments in [["queues", "list"], ["queues", "list", "--json"], ["queues", "show", "partner", "--json"]] {
            assertNoSecret(try CourierRunner.run(arguments, databaseURL: databaseURL))
        }

        // Other settings leave OAuth alone.
        XCTAssertEqual(try courier("queues", "set", "partner", "--max-attempts", "4").status, 0)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues WHERE oauth_client_secret IS NOT NULL"), 1)

        let removed = try courier("queues", "set", "partner", "--no-oauth")
        XCTAssertEqual(removed.status, 0, removed.stderr)
        XCTAssertTrue(removed.stdout.contains("OAuth: no."), removed.stdout)
        XCTAssertEqual(
            try count(
                """
                SELECT count(*) FROM courier.queues WHERE name = 'partner' AND oauth_token_url IS NULL
                AND oauth_client_id IS NULL AND oauth_client_secret IS NULL AND oauth_scope IS NULL AND max_attempts = 4
                """), 1)
        let json2 = try XCTUnwrap(try courier("queues", "show", "partner", "--json").json() as? [String: Any])
        XCTAssertTrue(json2["oauth"] is NSNull)
    }

    func testSecretFromStdinAndFromTheEnvironment() throws {
        let fromStdin = try courier(
            "queues", "set", "a", "--create", "--oauth-token-url", "http://127.0.0.1:9/token", "--oauth-client-id", "c",
            "--oauth-client-secret-file", "-", stdin: Data(secret.utf8))
        XCTAssertEqual(fromStdin.status, 0, fromStdin.stderr)
        let fromEnvironment = try CourierRunner.run(
            ["queues", "set", "b", "--create", "--oauth-token-url", "http://127.0.0.1:9/token", "--oauth-client-id", "c"],
            databaseURL: databaseURL, environment: ["COURIER_OAUTH_CLIENT_SECRET": secret])
        XCTAssertEqual(fromEnvironment.status, 0, fromEnvironment.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues WHERE oauth_client_secret = $1", [secret]), 2)
    }

    func testIncompleteOrBadOAuthSettingsAreOneUsageErrorAndChangeNothing() throws {
        let path = try secretFile(secret)
        assertFails(
            try courier("queues", "set", "q", "--create", "--oauth-token-url", "https://id.example.com/t",
                        "--oauth-client-secret-file", path),
            code: 2, mentioning: "--oauth-client-id")
        assertFails(
            try courier("queues", "set", "q", "--create", "--oauth-token-url", "ftp://id.example.com/t",
                        "--oauth-client-id", "c", "--oauth-client-secret-file", path),
            code: 2, mentioning: "--oauth-token-url")
        assertFails(
            try courier("queues", "set", "q", "--create", "--oauth-token-url", "https://id.example.com/t",
                        "--oauth-client-id", "c"),
            code: 2, mentioning: "secret is missing")
        assertFails(
            try courier("queues", "set", "q", "--create", "--no-oauth", "--oauth-client-id", "c"),
            code: 2, mentioning: "--no-oauth")
        assertFails(
            try courier("queues", "set", "q", "--create", "--oauth-token-url", "https://id.example.com/t",
                        "--oauth-client-id", "c", "--oauth-client-secret-file", try secretFile("two\nlines")),
            code: 2, mentioning: "printable ASCII")
        // The secret has no flag of its own.
        let flag = try courier("queues", "set", "q", "--create", "--oauth-client-secret", secret)
        XCTAssertEqual(flag.status, 2)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.queues"), 0)
        // The database refuses a partial set written by hand.
        XCTAssertThrowsError(try connection.query("INSERT INTO courier.queues (name, oauth_token_url) VALUES ('x', 'https://a/')"))
    }
}
