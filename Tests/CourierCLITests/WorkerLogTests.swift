import CourierSink
import CourierTesting
import Foundation
import XCTest

@testable import CourierCLI

#if canImport(Glibc)
    import Glibc
#endif

/// The worker's log lines as an operator meets them, from a real worker (the formats on their
/// own: LogFormatTests in CourierCLIUnitTests).
final class WorkerLogTests: CLITestCase {
    /// A real worker against a real receiver: a debug line per delivery with the job's id,
    /// queue, host, attempt and outcome, a warning for a job that goes dead, an info summary.
    func testWorkerLogsDeliveriesDeadJobsAndASummary() async throws {
        let sink = try await HTTPSink.start { request in
            request.path == "/bad" ? .respond(status: 400) : .respond(status: 200)
        }
        defer { Task { await sink.shutdown() } }
        let good = try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', queue => 'logs')", [sink.baseURL + "/ok"]
        )[0].decode(0, as: Int64.self)
        let bad = try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', queue => 'logs')", [sink.baseURL + "/bad"]
        )[0].decode(0, as: Int64.self)
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("worker-log-\(UUID().uuidString)")
        XCTAssertTrue(FileManager.default.createFile(atPath: log.path, contents: nil), log.path)
        defer { try? FileManager.default.removeItem(at: log) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments = [
            "worker", "--database-url", databaseURL, "--queues", "logs", "--allow-private-targets", "--log-level",
            "debug", "--log-format", "json", "--summary-interval", "1s", "--poll-interval", "100ms",
        ]
        process.standardError = try FileHandle(forWritingTo: log)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        func lines() -> [[String: String]] {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String]
            }
        }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, !lines().contains(where: { $0["message"] == "summary" && $0["delivered"] == "1" }) {
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        kill(process.processIdentifier, SIGTERM)
        waitForExit(process)
        let all = lines()
        let delivered = all.first { $0["message"] == "delivery finished" && $0["job.id"] == String(good) }
        XCTAssertEqual(delivered?["job.queue"], "logs")
        XCTAssertEqual(delivered?["job.host"], "127.0.0.1")
        XCTAssertEqual(delivered?["job.attempt"], "1")
        XCTAssertEqual(delivered?["outcome"], "succeeded")
        XCTAssertEqual(delivered?["level"], "debug")
        let dead = all.first { $0["message"] == "job moved to the dead letters" }
        XCTAssertEqual(dead?["level"], "warning")
        XCTAssertEqual(dead?["job.id"], String(bad))
        XCTAssertTrue(dead?["error"]?.contains("400") == true, "\(dead ?? [:])")
        XCTAssertTrue(
            all.contains { $0["message"] == "summary" && $0["level"] == "info" && $0["delivered"] == "1" && $0["dead"] == "1" },
            "no summary with the outcomes: \(all.filter { $0["message"] == "summary" })")
    }

    func testUnknownLogFormatIsOneUsageLine() throws {
        assertFails(try courier("worker", "--log-format", "xml"), code: 2, mentioning: "--log-format")
    }
}
