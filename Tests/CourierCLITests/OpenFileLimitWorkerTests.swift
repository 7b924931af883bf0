import CourierSink
import CourierTesting
import Foundation
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A worker started with a shell's open-file limit raises it for its connection budget and
/// delivers; read from the running process's `/proc/<pid>/limits`, not from its log (the log
/// lines on their own: MaxConnectionsFlagTests in CourierCLIUnitTests).
final class OpenFileLimitWorkerTests: CLITestCase {
    func testAWorkerRaisesItsSoftLimitForTheBudgetAndDelivers() async throws {
        let sink = try await HTTPSink.start { _ in .respond(status: 200) }
        defer { Task { await sink.shutdown() } }
        let id = try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', queue => 'limits')", [sink.baseURL + "/ok"]
        )[0].decode(0, as: Int64.self)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        process.arguments = [
            "--nofile=1024:8192", CourierBinary.path, "worker", "--database-url", databaseURL, "--queues", "limits",
            "--allow-private-targets", "--max-connections", "3000", "--poll-interval", "100ms",
        ]
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        func state() throws -> String {
            try connection.query("SELECT state::text FROM courier.jobs WHERE id = $1", [id])[0].decode(0, as: String.self)
        }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, try state() != "succeeded" { try await Task.sleep(nanoseconds: 100_000_000) }
        XCTAssertEqual(try state(), "succeeded")
        // prlimit execs the worker: the same process, its limit as the worker left it.
        let limits = try String(contentsOfFile: "/proc/\(process.processIdentifier)/limits", encoding: .utf8)
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }.map(String.init) ?? limits
        let fields = line.split(separator: " ").map(String.init)
        XCTAssertEqual(Array(fields.suffix(3)), ["3064", "8192", "files"], line)
        kill(process.processIdentifier, SIGTERM)
        waitForExit(process)
        XCTAssertEqual(process.terminationStatus, 0)
    }
}
