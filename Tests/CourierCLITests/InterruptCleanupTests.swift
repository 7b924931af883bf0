import CourierCLISupport
import CourierTesting
import Foundation
import Postgres
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Ctrl-C (SIGINT) in the middle of `courier demo` and `courier bench`: the throwaway
/// PostgreSQL cluster each started is stopped and its directory deleted, and nothing either
/// started (the server's processes, the benchmark's worker) keeps running.
///
/// The real binary runs with `TMPDIR` pointing at a directory of the test's own, where the
/// cluster appears as `courier-cluster-*`. SIGINT goes once the command uses its cluster
/// (its migrations have begun, so the command holds the cluster and has registered its
/// cleanup). Every wait is bounded, and whatever a failed run leaves is removed in `tearDown`.
final class InterruptCleanupTests: XCTestCase {
    private var temporary: URL!
    private var command: pid_t = 0
    /// How the command ended, once it has: its exit code, or the signal that killed it.
    private var ending: Ending?

    private enum Ending: Equatable {
        case exited(Int32)
        case killed(by: Int32)
    }
    private var serverBinaries = ""

    override func setUpWithError() throws {
        guard let bin = ThrowawayCluster.findServerBinaries() else {
            let message = "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: install postgresql"
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                throw MissingPrerequisite(description: message + " (CI=true: a missing prerequisite is a failure)")
            }
            print("warning: SKIPPING interrupt test: \(message)")
            throw XCTSkip(message)
        }
        serverBinaries = bin
        // A short name: the cluster's socket lives two levels below, within 107 bytes.
        temporary = FileManager.default.temporaryDirectory.appendingPathComponent("interrupt-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        // As root the cluster belongs to `postgres`, which must reach its directory in here.
        chmod(temporary.path, 0o755)
    }

    override func tearDown() {
        if command > 0 && ending == nil {
            kill(command, SIGKILL)
            var status: Int32 = 0
            while waitpid(command, &status, 0) < 0 && errno == EINTR {}
        }
        // A cluster a failed run left behind: stop it and delete it.
        for cluster in (try? clusters()) ?? [] {
            let data = cluster.appendingPathComponent("data").path
            if FileManager.default.fileExists(atPath: data + "/postmaster.pid") {
                let owner = getuid() == 0 ? "/usr/sbin/runuser -u postgres -- " : ""
                _ = runShellCommand("\(owner)\(serverBinaries)/pg_ctl -D '\(data)' -m immediate -w -t 30 stop")
            }
        }
        if let temporary { try? FileManager.default.removeItem(at: temporary) }
    }

    func testCtrlCDuringTheDemoStopsAndDeletesItsCluster() throws {
        try assertInterruptCleansUp(["demo"])
    }

    func testCtrlCDuringTheBenchmarkStopsItsClusterAndItsWorker() throws {
        // One job a second for ten minutes: the benchmark is still at work when interrupted.
        try assertInterruptCleansUp(
            ["bench", "--scenarios", "latency", "--rate", "1", "--duration", "600s"], worker: true)
    }

    // MARK: helpers

    private func assertInterruptCleansUp(
        _ arguments: [String], worker: Bool = false, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let output = temporary.appendingPathComponent("output")
        command = try spawn(arguments, output: output.path)

        // The cluster is up and in use: its directory, its server's pid file, the command's
        // migrations under way (and, for the benchmark, its worker connected).
        var cluster: URL?
        var postmaster: pid_t = 0
        var port = 0
        let started = try waitFor(120, "\(arguments[0]) never used its cluster", output: output) {
            guard ended() == nil else { return true }
            guard let found = try clusters().first,
                let pidFile = try? String(contentsOfFile: found.path + "/data/postmaster.pid", encoding: .utf8)
            else { return false }
            let fields = pidFile.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            guard fields.count > 3, let pid = pid_t(fields[0]), let serverPort = Int(fields[3]) else { return false }
            (cluster, postmaster, port) = (found, pid, serverPort)
            guard let connection = try? PostgresConnection("postgresql://postgres@127.0.0.1:\(port)/postgres?connect_timeout=2")
            else { return false }
            defer { connection.close() }
            // Errors (the server still starting) only mean "not yet".
            let migrating = (try? connection.query(
                "SELECT to_regclass('courier.schema_migrations') IS NOT NULL")[0].decode(0, as: Bool.self)) ?? false
            guard migrating, worker else { return migrating }
            let workers = (try? connection.query(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'courier-worker%'")[0]
                .decode(0, as: Int.self)) ?? 0
            return workers > 0
        }
        guard started, ended() == nil, let cluster else {
            return XCTFail("\(arguments[0]) ended before it was interrupted: \(outputText(output))", file: file, line: line)
        }
        let serverProcesses = [postmaster] + children(of: postmaster)
        let workerProcesses = children(of: command).filter { commandLine($0).contains("worker") }
        if worker { XCTAssertFalse(workerProcesses.isEmpty, "no worker process to clean up", file: file, line: line) }

        XCTAssertEqual(kill(command, SIGINT), 0)
        _ = try waitFor(90, "\(arguments[0]) did not exit after SIGINT", output: output) { ended() != nil }
        // SignalCleanup's own exit, 128 + SIGINT, after cleaning up (not a death by the signal).
        XCTAssertEqual(ending, .exited(128 + SIGINT), outputText(output), file: file, line: line)
        XCTAssertTrue(outputText(output).contains("interrupted: cleaning up"), outputText(output), file: file, line: line)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: cluster.path), "\(cluster.path) is still there", file: file, line: line)
        XCTAssertEqual(try clusters(), [], "a cluster directory is left", file: file, line: line)
        // Nor anything else of the command's (the benchmark's worker log and secrets key).
        let left = try FileManager.default.contentsOfDirectory(atPath: temporary.path).filter { $0 != "output" }
        XCTAssertEqual(left, [], "left in TMPDIR after Ctrl-C", file: file, line: line)
        let running = (serverProcesses + workerProcesses).filter(isRunning)
        XCTAssertEqual(
            running, [], "still running: \(running.map { "\($0) \(commandLine($0))" })", file: file, line: line)
        if let connection = try? PostgresConnection("postgresql://postgres@127.0.0.1:\(port)/postgres?connect_timeout=2") {
            connection.close()
            XCTFail("something still answers on the cluster's port \(port)", file: file, line: line)
        }
    }

    /// Starts the real binary with `TMPDIR` set to this test's directory, output to `output`.
    private func spawn(_ arguments: [String], output: String) throws -> pid_t {
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = temporary.path
        environment.removeValue(forKey: "COURIER_DATABASE_URL")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([CourierBinary.path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, CourierBinary.path, &actions, nil, argv, envp)
        guard spawned == 0 else {
            throw CocoaError(.executableLoad, userInfo: ["path": CourierBinary.path, "errno": spawned])
        }
        return pid
    }

    /// How the command ended, or nil while it runs (collects it once it has exited).
    private func ended() -> Ending? {
        if let ending { return ending }
        var status: Int32 = 0
        guard command > 0, waitpid(command, &status, WNOHANG) == command else { return nil }
        ending = (status & 0x7f) == 0 ? .exited((status >> 8) & 0xff) : .killed(by: status & 0x7f)
        return ending
    }

    /// Polls `condition` every 20 ms, at most `seconds`: a bound that keeps a broken command
    /// from hanging the run, not a measurement. Fails the test when it never holds.
    private func waitFor(
        _ seconds: Double, _ failure: String, output: URL, _ condition: () throws -> Bool
    ) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        XCTFail("\(failure) within \(Int(seconds)) s: \(outputText(output))")
        return false
    }

    /// The throwaway clusters in this test's directory.
    private func clusters() throws -> [URL] {
        guard let temporary else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: temporary.path)
            .filter { $0.hasPrefix("courier-cluster-") }.sorted().map { temporary.appendingPathComponent($0) }
    }

    private func outputText(_ output: URL) -> String {
        (try? String(contentsOf: output, encoding: .utf8)) ?? ""
    }

    /// Processes whose parent is `parent`, from /proc.
    private func children(of parent: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(pid_t.init).filter { processStat($0)?.parent == parent }
    }

    /// State and parent of a process from /proc/<pid>/stat (the fields after the name).
    private func processStat(_ pid: pid_t) -> (state: Character, parent: pid_t)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 1, let state = fields[0].first, let parent = pid_t(fields[1]) else { return nil }
        return (state, parent)
    }

    /// A process that exists and is not a zombie waiting for its parent to collect it.
    private func isRunning(_ pid: pid_t) -> Bool {
        guard let state = processStat(pid)?.state else { return false }
        return state != "Z" && state != "X"
    }

    private func commandLine(_ pid: pid_t) -> String {
        let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") ?? Data()
        return String(decoding: data.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
    }
}

/// A test prerequisite missing under `CI=true`: thrown, it fails the test with its message.
private struct MissingPrerequisite: Error, CustomStringConvertible {
    let description: String
}
