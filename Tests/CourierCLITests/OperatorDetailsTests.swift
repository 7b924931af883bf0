import CourierTesting
import Foundation
import Postgres
import XCTest

@testable import CourierCLI
@testable import CourierCLISupport

/// The smaller things an operator meets: cut listings, hints when nothing happened, requeue
/// filters, binary excerpts, `stats --watch` into a pipe.
final class OperatorDetailsTests: CLITestCase {
    func testListsSayWhenOutputWasCutAtLimit() throws {
        for _ in 0..<3 { try insertJob(state: "dead", lastError: "HTTP 500") }
        let cut = try courier("jobs", "list", "--limit", "2")
        XCTAssertEqual(cut.status, 0, cut.stderr)
        XCTAssertTrue(
            cut.stdout.contains("More jobs match: showing the newest 2 (raise --limit or narrow the filters)."),
            cut.stdout)
        let whole = try courier("jobs", "list", "--limit", "3")
        XCTAssertFalse(whole.stdout.contains("More jobs match"), whole.stdout)
        let dead = try courier("dead", "list", "--limit", "1")
        XCTAssertTrue(dead.stdout.contains("showing the newest 1"), dead.stdout)

        let json = try courier("dead", "list", "--limit", "2", "--json")
        XCTAssertEqual((try json.json() as? [Any])?.count, 2, "the JSON document stays a plain array")
        XCTAssertEqual(
            json.stderrLines, ["note: more jobs match: showing the newest 2 (raise --limit or narrow the filters)"])
        XCTAssertEqual(try courier("jobs", "list", "--limit", "3", "--json").stderr, "")

        for bad in [["--limit", "0"], ["--limit", "-1"], ["--limit=-1"], ["--limit", "-9223372036854775808"]] {
            assertFails(try courier(["jobs", "list"] + bad), code: 2, mentioning: "--limit must be at least 1")
            assertFails(try courier(["dead", "list"] + bad), code: 2, mentioning: "--limit must be at least 1")
        }
        assertFails(try courier("jobs", "list", "--limit", "many"), code: 2, mentioning: "--limit")
        assertFails(try courier("jobs", "list", "--limit"), code: 2, mentioning: "--limit")
        XCTAssertEqual(
            try courier("jobs", "list", "--limit", String(Int.max)).status, 0, "no overflow asking for one more")
    }

    func testRetryOfAJobThatCannotRunAgainSaysWhyAndWhatToDo() throws {
        let succeeded = try insertJob(state: "succeeded")
        let result = try courier("jobs", "retry", String(succeeded))
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(
            result.stderr.contains(
                "job \(succeeded): not scheduled now: it is succeeded (only pending or retrying jobs); "
                    + "it was delivered already; enqueue a new job to send it again"), result.stderr)
        let dead = try insertJob(state: "dead")
        XCTAssertTrue(try courier("jobs", "retry", String(dead)).stderr.contains("use courier dead requeue \(dead)"))
        let cancelled = try insertJob(state: "cancelled")
        XCTAssertTrue(try courier("jobs", "retry", String(cancelled)).stderr.contains("it was cancelled"))
        let cancel = try courier("jobs", "cancel", String(succeeded), String(cancelled))
        XCTAssertTrue(cancel.stderr.contains("job \(succeeded): not cancelled: it is succeeded"), cancel.stderr)
        XCTAssertTrue(cancel.stderr.contains("it is finished; nothing is left to cancel"), cancel.stderr)
        XCTAssertTrue(cancel.stderr.contains("it is cancelled already"), cancel.stderr)
        let pending = try insertJob()
        XCTAssertTrue(
            try courier("dead", "requeue", String(pending)).stderr.contains("courier jobs retry \(pending) runs it now")
        )
        XCTAssertEqual(
            try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'succeeded'", [succeeded]), 1)
    }

    func testDeadRequeueFiltersByLiteralURLSubstringAndTime() throws {
        let wildcard = try insertJob(state: "dead", url: "https://a.example/100%25_off", finishedAgo: 3600)
        let lookalike = try insertJob(state: "dead", url: "https://a.example/100x25yoff", finishedAgo: 3600)
        let old = try insertJob(state: "dead", url: "https://b.example/hook", finishedAgo: 3 * 86_400)
        let recent = try insertJob(state: "dead", url: "https://b.example/hook", finishedAgo: 3600)

        func listed(_ arguments: String...) throws -> [Int] {
            let result = try courier(["dead", "list", "--json"] + arguments)
            XCTAssertEqual(result.status, 0, result.stderr)
            return (try result.json() as? [[String: Any]])?.compactMap { $0["id"] as? Int } ?? []
        }
        XCTAssertEqual(try listed("--url-contains", "%25_"), [Int(wildcard)], "% and _ are literal, no LIKE wildcards")
        XCTAssertEqual(try listed("--url-contains", "_"), [Int(wildcard)])
        XCTAssertEqual(try listed("--url-contains", "b.example", "--failed-before", "1d"), [Int(old)])
        XCTAssertEqual(try listed("--url-contains", "b.example", "--failed-after", "2d"), [Int(recent)])
        XCTAssertEqual(try listed("--url-contains", "'; DROP TABLE courier.jobs; --"), [])

        let literal = try courier("dead", "requeue", "--all", "--url-contains", "%25_", "--yes", "--json")
        XCTAssertEqual((try literal.json() as? [String: Any])?["requeued"] as? Int, 1, literal.stderr)
        XCTAssertEqual(
            try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'pending'", [wildcard]), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'dead'", [lookalike]), 1)

        let before = try courier(
            "dead", "requeue", "--all", "--url-contains", "b.example", "--failed-before", "1d", "--yes")
        XCTAssertEqual(before.status, 0, before.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'pending'", [old]), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'dead'", [recent]), 1)
        let since = try courier(
            "dead", "requeue", "--all", "--failed-after", "2d", "--url-contains", "b.example", "--yes")
        XCTAssertEqual(since.status, 0, since.stderr)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE id = $1 AND state = 'pending'", [recent]), 1)
        assertFails(try courier("dead", "requeue", "5", "--url-contains", "x"), code: 2, mentioning: "filter --all")
    }

    func testBinaryBodiesAndResponseExcerptsPrintEscaped() throws {
        let id = try insertJob(state: "dead")
        let body: [UInt8] = [0x1B] + Array("[31mred".utf8) + [0xFF, 0x00, 0x07, 0x5C] + Array("ok\r\n".utf8)
        try connection.query("UPDATE courier.jobs SET body = $1 WHERE id = $2", [body, id])
        let excerpt = "\u{1B}]0;pwned\u{07}\u{1B}[2J\u{9B}31m\u{202E}evil\u{7F} fine é"
        try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, error, worker,
                                          response_excerpt)
            VALUES ($1, 1, now(), now(), 3, 500, 'HTTP 500', 'w', $2)
            """, [id, excerpt])
        for command in [
            ["jobs", "show", String(id)], ["dead", "show", String(id)], ["jobs", "show", String(id), "--json"],
        ] {
            let result = try courier(command)
            XCTAssertEqual(result.status, 0, result.stderr)
            for raw in ["\u{1B}", "\u{07}", "\u{9B}", "\u{202E}", "\u{7F}", "\r"] {
                XCTAssertFalse(result.stdout.contains(raw), "\(command) printed \(raw.unicodeScalars.first!.value)")
            }
        }
        let human = try courier("jobs", "show", String(id)).stdout
        XCTAssertTrue(human.contains(#"\e[31mred\xFF\x00\x07\\ok\r\n"#), human)
        XCTAssertTrue(human.contains(#"#1 response: \e]0;pwned\x07\e[2J\u{009B}31m\u{202E}evil\x7F fine é"#), human)
        let json = try XCTUnwrap(try courier("jobs", "show", String(id), "--json").json() as? [String: Any])
        XCTAssertEqual(json["body_excerpt"] as? String, #"\e[31mred\xFF\x00\x07\\ok\r\n"#)
        let attempts = try XCTUnwrap(json["attempts"] as? [[String: Any]])
        XCTAssertEqual(
            attempts.first?["response_excerpt"] as? String, #"\e]0;pwned\x07\e[2J\u{009B}31m\u{202E}evil\x7F fine é"#)

        XCTAssertEqual(Output.escaped([0xE2, 0x82]), #"\xE2\x82"#, "a cut multi-byte character")
        XCTAssertEqual(Output.escaped([0xC0, 0xAF]), #"\xC0\xAF"#, "an overlong encoding")
        XCTAssertEqual(Output.escaped([0xED, 0xA0, 0x80]), #"\xED\xA0\x80"#, "a surrogate")
        XCTAssertEqual(Output.escaped(Array("日本 ✓".utf8)), "日本 ✓")
        XCTAssertEqual(Output.escaped([UInt8]()), "")
    }

    func testStatsWatchIntoAFileWritesPlainSnapshots() throws {
        try insertJob(queue: "billing")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "courier-watch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outURL = directory.appendingPathComponent("out")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        let out = try FileHandle(forWritingTo: outURL)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments = ["stats", "--watch", "--interval", "200ms"]
        process.environment = ProcessInfo.processInfo.environment.merging(["COURIER_DATABASE_URL": databaseURL]) { $1 }
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        defer {
            if process.isRunning { process.terminate() }
            waitForExit(process)
            try? out.close()
        }
        // Snapshots reach the file while the command runs (it flushes each one): wait for two.
        let deadline = Date().addingTimeInterval(60)
        var text = ""
        while Date() < deadline {
            text = String(decoding: try Data(contentsOf: outURL), as: UTF8.self)
            if text.components(separatedBy: "courier stats  ").count > 2 { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        XCTAssertGreaterThan(text.components(separatedBy: "courier stats  ").count, 2, text)
        XCTAssertFalse(text.contains("\u{1B}"), "no escape codes into a file: \(text.debugDescription)")
        XCTAssertFalse(text.contains("Ctrl-C"), text)
        XCTAssertTrue(text.contains("billing"), text)
    }
}
