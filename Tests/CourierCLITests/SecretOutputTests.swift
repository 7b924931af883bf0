import CourierCLI
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Plants secrets where an operator's commands meet them (a database URL that does not parse,
/// `?token=` in a job URL, secret headers, errors that quote them) and greps every output of
/// every command, stdout and stderr, human and `--json`, for them.
final class SecretOutputTests: CLITestCase {
    private let secrets = [
        "PlantedDbPass1", "PlantedDbPass2", "PlantedDbPass3", "PlantedDbPass4", "PlantedToken5", "PlantedCred6",
        "PlantedAuth7", "PlantedUser8", "PlantedSig9",
    ]
    private var outputs: [(String, CommandResult)] = []

    private func record(_ arguments: [String], databaseURL: String?, stdin: Data? = nil) throws -> CommandResult {
        let result = try CourierRunner.run(arguments, databaseURL: databaseURL, stdin: stdin)
        outputs.append((arguments.joined(separator: " "), result))
        return result
    }

    private func assertNoSecretPrinted(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(outputs.isEmpty)
        for (command, result) in outputs {
            for secret in secrets {
                XCTAssertFalse(
                    result.stdout.contains(secret), "stdout of `\(command)` holds \(secret): \(result.stdout)",
                    file: file, line: line)
                XCTAssertFalse(
                    result.stderr.contains(secret), "stderr of `\(command)` holds \(secret): \(result.stderr)",
                    file: file, line: line)
            }
            XCTAssertFalse(
                result.stdout.contains("\u{1B}") || result.stderr.contains("\u{1B}"), "escape in `\(command)`",
                file: file, line: line)
        }
    }

    /// Every command that connects to the database, with the arguments it needs to get there.
    private let databaseCommands: [[String]] = [
        ["migrate"], ["enqueue", "--url", "https://example.com/x"], ["jobs", "list"], ["jobs", "show", "1"],
        ["jobs", "cancel", "1"], ["jobs", "retry", "1"], ["dead", "list"], ["dead", "show", "1"],
        ["dead", "requeue", "1"],
        ["dead", "requeue", "--all", "--yes"], ["queues", "list"], ["queues", "pause", "q"], ["queues", "resume", "q"],
        ["queues", "set", "q", "--max-attempts", "3"], ["stats"], ["purge", "--state", "dead", "--older-than", "7d"],
        ["worker"],
    ]

    func testDatabaseURLsThatDoNotParseNeverEchoTheirPassword() throws {
        let badURLs = [
            "postgresql://courier:PlantedDbPass1@[::1/courier",
            "postgresql://courier:PlantedDbPass2%zz@127.0.0.1:1/courier",
            "host=127.0.0.1 port=1 password=PlantedDbPass3 x",
            "postgresq://PlantedUser8:PlantedDbPass4@127.0.0.1:1/courier",
            "postgresql://courier@127.0.0.1:1/courier?password=PlantedDbPass1&bogus=1",
            "postgresql://courier:PlantedDbPass2@127.0.0.1:99999/courier",
        ]
        for url in badURLs {
            for command in databaseCommands {
                let viaFlag = try record(command + ["--database-url", url], databaseURL: nil)
                XCTAssertEqual(viaFlag.status, 1, "\(command) \(url): \(viaFlag.stderr)")
                XCTAssertEqual(viaFlag.stderrLines.count, 1, viaFlag.stderr)
                XCTAssertTrue(viaFlag.stderr.hasPrefix("error: "), viaFlag.stderr)
            }
            let viaEnvironment = try record(["jobs", "list", "--json"], databaseURL: url)
            XCTAssertEqual(viaEnvironment.status, 1, viaEnvironment.stderr)
        }
        assertNoSecretPrinted()
    }

    func testJobURLsHeadersAndErrorsAreRedactedInEveryOutput() throws {
        let enqueued = try record(
            ["enqueue", "--url", "https://example.com/hook?token=PlantedToken5&page=2",
             "--header", "X-Api-Credential: PlantedCred6", "--header", "Authorization: Bearer PlantedAuth7",
             "--header", "X-Tenant: 7"],
            databaseURL: databaseURL)
        XCTAssertEqual(enqueued.status, 0, enqueued.stderr)
        let id = try XCTUnwrap(Int64(enqueued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        // What a worker might have stored, quoting the request (and a terminal escape), and a URL
        // with credentials that enqueue refuses, written around it (CHECKs dropped: this
        // database is the test's own).
        try dropCheckConstraints(["courier.jobs"])
        try connection.query(
            """
            UPDATE courier.jobs SET state = 'dead', finished_at = now(), attempt = 1,
                url = 'https://PlantedUser8:PlantedDbPass1@example.com/hook?token=PlantedToken5&page=2',
                last_error = 'POST https://example.com/hook?token=PlantedToken5 failed; '
                             || 'sent Authorization: Bearer PlantedAuth7'
                             || chr(27) || '[2J'
            WHERE id = $1
            """, [id])
        try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, error, worker,
                                          response_excerpt)
            VALUES ($1, 1, now(), now(), 5, 401, 'HTTP 401 for https://example.com/hook?sig=PlantedSig9', 'w',
                    'echo: X-Api-Credential: PlantedCred6')
            """, [id])
        for flag in [[], ["--json"]] {
            let commands = [["jobs", "list"], ["jobs", "show", String(id)], ["dead", "list"], ["dead", "show", String(id)]]
            for command in commands {
                let result = try record(command + flag, databaseURL: databaseURL)
                XCTAssertEqual(result.status, 0, "\(command): \(result.stderr)")
                XCTAssertTrue(result.stdout.contains("example.com/hook"), result.stdout)
            }
        }
        let shown = try record(["jobs", "show", String(id)], databaseURL: databaseURL)
        XCTAssertTrue(shown.stdout.contains("token=***"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("X-Tenant: 7"), shown.stdout)

        // Errors that quote the input: a refused URL and refused JSONL lines (with the request
        // checks of courier.jobs back on).
        try setRowTriggers(enabled: true)
        let refused = try record(
            ["enqueue", "--url", "ftp://PlantedUser8:PlantedDbPass2@example.com/?token=PlantedToken5"],
            databaseURL: databaseURL)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        let lines = #"{"url": "ftp://u:PlantedDbPass3@example.com/?api_key=PlantedToken5"}"# + "\n"
            + #"{"url": "https://example.com/?token=PlantedToken5", "headers": {"Authorization": 5}}"# + "\n"
        let strict = try record(["enqueue", "--jsonl", "-"], databaseURL: databaseURL, stdin: Data(lines.utf8))
        XCTAssertEqual(strict.status, 2, strict.stderr)
        for flag in [[], ["--json"]] {
            let result = try record(
                ["enqueue", "--jsonl", "-", "--skip-invalid"] + flag, databaseURL: databaseURL, stdin: Data(lines.utf8))
            XCTAssertEqual(result.status, 0, result.stderr)
        }
        assertNoSecretPrinted()
    }
}
