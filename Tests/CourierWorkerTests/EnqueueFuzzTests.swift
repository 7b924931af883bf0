import CourierCore
import CourierSink
import CourierTesting
import Foundation
import Postgres
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Generated jobs mixing valid and edge values go through `courier.enqueue` and a real worker
/// process: each is refused with one clear error and nothing written, or ends `succeeded` or
/// `dead` with a reason; the worker never exits on its own and stops on SIGTERM in time.
final class EnqueueFuzzTests: XCTestCase {
    /// A small deterministic generator (SplitMix64), so a failure names a seed that replays it.
    private struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    private struct Row {
        var url: String
        var method: String
        var headers: String
        var runAt: String
        var schedule: String
        var maxAttempts: Int?
        var description: String { "\(method) \(url.debugDescription) headers \(headers) run_at \(runAt) schedule \(schedule) max \(maxAttempts.map(String.init) ?? "nil")" }
    }

    /// A row that is valid in every field, then, for about half the rows, one or two fields
    /// replaced by an edge value (some valid, most not).
    private func makeRow(_ random: inout SplitMix, port: Int) -> Row {
        func pick<T>(_ values: [T]) -> T { values[Int(random.next() % UInt64(values.count))] }
        let validHosts = [
            "127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)", "[::ffff:127.0.0.1]:\(port)",
        ]
        let edgeHosts = [
            "[::127.0.0.1]:\(port)", "[2002:7f00:1::]:\(port)", "[fec0::1]:\(port)", "[64:ff9b::7f00:1]:\(port)",
            "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:99999", "127.0.0.1:1", "127.0.0.1", "bad host", "",
            "user:pw@127.0.0.1:\(port)",
        ]
        let paths = ["/ok", "/ok", "/fail", "/gone", "/ok?token=s3cret-fuzz"]
        var row = Row(
            url: "http://" + pick(validHosts) + pick(paths), method: pick(["POST", "GET", "PUT", "PATCH", "DELETE"]),
            headers: pick([#"{}"#, #"{"X-Tenant": "acme"}"#, #"{"X-Api-Credential": "s3cret-fuzz"}"#]),
            runAt: pick(["now", "past", "epoch"]), schedule: "{1 second}", maxAttempts: pick([nil, 1, 2, 3]))
        let mutations = pick([0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
        for _ in 0..<mutations {
            switch pick(["url", "host", "method", "headers", "runAt", "schedule", "maxAttempts"]) {
            case "url":
                let scheme = pick(["https://", "ftp://", "HTTP://", ""])
                let tail = pick(["", " trailing", "\r\nX-Injected: 1", "#frag", "\u{7f}", "/ünï", "/a%20b"])
                row.url = scheme + pick(validHosts) + pick(paths) + tail
            case "host":
                row.url = "http://" + pick(edgeHosts) + pick(paths)
            case "method":
                row.method = pick(["post", "BREW", "PO ST", "GET\r\nX: y", "", "G\u{0}T", "GET / HTTP/1.1\r\n\r\nPOST"])
            case "headers":
                row.headers = pick([
                    #"{"X-Ünï": "1"}"#, #"{"X-A": "line\r\nX-B: 2"}"#, #"{"X-A": 1}"#, #"{"X-A": null}"#, #""x""#,
                    "null", "[]", #"{"Content-Length": "5"}"#, #"{"bad name": "x"}"#,
                    #"{"X-Long": "\#(String(repeating: "v", count: 9000))"}"#, #"{"X-Ok": "caf\u00e9"}"#,
                ])
            case "runAt":
                row.runAt = pick(["infinity", "-infinity", "future", "300000-01-01", "4713-01-01 BC"])
            case "schedule":
                row.schedule = pick(["{0 seconds}", "{1000000 years}", "{-1 seconds}", "{40 days}", "{}", "{NULL}"])
            default:
                row.maxAttempts = pick([0, 1001, Int(Int32.max), -1])
            }
        }
        return row
    }

    func testGeneratedRowsAreRefusedCleanlyOrSettleWithAReason() async throws {
        let url = try TestDatabase.create(label: "fuzz")
        defer { TestDatabase.drop(url) }
        let probe = try JobsProbe(url: url)
        defer { probe.close() }
        let queue = "fuzz"
        let sink = try await HTTPSink.start { request in
            if request.path.hasPrefix("/fail") { return .respond(status: 500) }
            if request.path.hasPrefix("/gone") { return .respond(status: 410) }
            return .respond(status: 200)
        }
        defer { Task { await sink.shutdown() } }

        // Rows without max_attempts take the queue's: 3 rather than the default 10, so that a
        // job failing every second settles in about 2 s, not 9 (a row that sets it still may
        // ask for 1 to 1000, or an edge value).
        try probe.connection.query("INSERT INTO courier.queues (name, max_attempts) VALUES ($1, 3)", [queue])

        let seed = UInt64(ProcessInfo.processInfo.environment["COURIER_FUZZ_SEED"] ?? "") ?? 20_261_123
        var random = SplitMix(state: seed)
        var accepted: [Int64] = []
        var refused = 0
        for n in 0..<2_000 {
            let row = makeRow(&random, port: sink.port)
            // Each accepted row is one job, so this is the count before the row, without asking.
            let before = accepted.count
            do {
                let id: Int64 = try probe.connection.query(
                    """
                    SELECT courier.enqueue(url => $1, payload => '{"n": 1}', method => $2, headers => $3::jsonb,
                        queue => $4,
                        run_at => CASE $5::text WHEN 'future' THEN now() + interval '2 years'
                                                WHEN 'past' THEN now() - interval '1 day'
                                                ELSE $5::text::timestamptz END,
                        max_attempts => $6, retry_schedule => $7::interval[])
                    """,
                    [row.url, row.method, row.headers, queue, row.runAt, row.maxAttempts, row.schedule])[0].decode(0)
                accepted.append(id)
            } catch let error as PostgresError {
                refused += 1
                let after: Int = try probe.connection.query("SELECT count(*) FROM courier.jobs")[0].decode(0)
                XCTAssertEqual(after, before, "row \(n) (seed \(seed)) was refused but wrote something: \(row.description)")
                XCTAssertFalse(error.message.isEmpty)
                XCTAssertFalse(error.message.contains("\n"), "row \(n): a multi-line error: \(error.message)")
                XCTAssertTrue(
                    error.sqlState?.hasPrefix("22") ?? false,
                    "row \(n) (seed \(seed)): \(error.sqlState ?? "-") \(error.message) for \(row.description)")
                XCTAssertFalse(error.description.contains("s3cret-fuzz"), "a secret in an error: \(error.description)")
            }
        }
        XCTAssertGreaterThan(accepted.count, 300, "too few rows accepted to exercise the worker")
        XCTAssertGreaterThan(refused, 300, "too few rows refused to exercise validation")

        // This test is about rows, not receivers: each host answers 200, 500 and 410 by path, so
        // neither its circuit breaker nor a 410 may stop its other jobs.
        var host = DestinationSettingsChange()
        host.breakerThreshold = 100_000
        host.disableOnGone = false
        for row in try probe.connection.query("SELECT DISTINCT host FROM courier.jobs").rows {
            try DestinationStore(connection: probe.connection).update(try row.decode(0, as: String.self), host)
        }

        let errorLog = NSTemporaryDirectory() + "courier-fuzz-worker-\(getpid()).log"
        _ = FileManager.default.createFile(atPath: errorLog, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: errorLog) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments = [
            "worker", "--database-url", url, "--queues", queue, "--allow-private-targets", "--poll-interval", "100ms",
            "--request-timeout", "2s", "--connect-timeout", "1s", "--grace-period", "3s", "--concurrency", "64",
            "--per-host-limit", "64", "--log-level", "warning",
        ]
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorLog))
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        // Every accepted job settles: succeeded, or dead with a reason. Jobs whose schedule
        // retries them (1 s, up to 3 attempts unless the row says otherwise) settle within
        // seconds.
        let deadline = Date().addingTimeInterval(120)
        var unsettled = Int.max
        while Date() < deadline {
            XCTAssertTrue(process.isRunning, "the worker exited during the run")
            unsettled = try probe.unsettled(queue: queue)
            if unsettled == 0 { break }
            try await Task.sleep(nanoseconds: 200_000_000)
        }
        let states = try probe.states(queue: queue)
        XCTAssertEqual(unsettled, 0, "jobs never settled: \(states)")
        XCTAssertTrue(process.isRunning, "the worker exited on its own")
        for row in try probe.connection.query(
            "SELECT id, state::text, coalesce(last_error, '') FROM courier.jobs WHERE queue = $1", [queue]
        ).rows {
            let id: Int64 = try row.decode(0)
            let state: String = try row.decode(1)
            let error: String = try row.decode(2)
            XCTAssertTrue(["succeeded", "dead"].contains(state), "job \(id) is \(state)")
            if state == "dead" { XCTAssertFalse(error.isEmpty, "a dead job without a reason") }
            XCTAssertFalse(error.contains("s3cret-fuzz"), "a secret in last_error: \(error)")
        }

        let stopAsked = Date()
        kill(process.processIdentifier, SIGTERM)
        while process.isRunning, Date().timeIntervalSince(stopAsked) < 15 { try await Task.sleep(nanoseconds: 50_000_000) }
        XCTAssertFalse(process.isRunning, "SIGTERM did not stop the worker")
        XCTAssertLessThanOrEqual(Date().timeIntervalSince(stopAsked), 3 + 2, "stopping took longer than the grace period")
        XCTAssertEqual(process.terminationStatus, 0)
        let output = (try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? ""
        XCTAssertFalse(output.contains("s3cret-fuzz"), "a secret in the worker's log")
    }
}
