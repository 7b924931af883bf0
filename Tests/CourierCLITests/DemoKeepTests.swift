import CourierCLISupport
import CourierTesting
import Foundation
import Postgres
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// `courier demo --keep --web` with its output in a pipe: the database URL, the export line,
/// the password file and the console address arrive while it runs (stdout is line-buffered),
/// a second demo on the same console address refuses in one line (exit 2), and Ctrl-C
/// removes the cluster and the password file.
final class DemoKeepTests: XCTestCase {
    private var temporary: URL!
    private var pid: pid_t = 0

    override func setUpWithError() throws {
        guard ThrowawayCluster.findServerBinaries() != nil else { throw XCTSkip("no PostgreSQL server binaries") }
        // A short name: the cluster's socket lives two levels below, within 107 bytes.
        temporary = FileManager.default.temporaryDirectory.appendingPathComponent("demo-keep-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        chmod(temporary.path, 0o755)
    }

    override func tearDown() {
        if pid > 0 {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        if let temporary { try? FileManager.default.removeItem(at: temporary) }
    }

    func testKeptDemoPrintsItsAddressesAtOnceRefusesABusyPortAndCleansUpOnCtrlC() throws {
        let port = try ThrowawayCluster.freePort()
        let address = "127.0.0.1:\(port)"
        var pipeEnds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&pipeEnds), 0)
        pid = try spawn(["demo", "--keep", "--web", "--web-address", address], stdout: pipeEnds[1])
        close(pipeEnds[1])
        defer { close(pipeEnds[0]) }

        // Read the pipe while the demo runs, until the console's line arrives.
        var text = ""
        let deadline = Date().addingTimeInterval(180)
        while !text.contains("Web console:") && Date() < deadline {
            var poller = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 500) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(pipeEnds[0], &buffer, buffer.count)
            if count <= 0 { break }
            text += String(decoding: buffer[..<count], as: UTF8.self)
        }
        XCTAssertTrue(text.contains("Web console: http://\(address)"), text)
        let databaseLine = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("Database: ") }, text)
        let databaseURL = String(databaseLine.dropFirst("Database: ".count))
        XCTAssertTrue(text.contains("export COURIER_DATABASE_URL=\(databaseURL)"), text)
        let passwordFile = try XCTUnwrap(
            text.range(of: #"/\S+\.password"#, options: .regularExpression).map { String(text[$0]) }, text)
        XCTAssertTrue(FileManager.default.fileExists(atPath: passwordFile))

        // The kept cluster answers other commands.
        let stats = try CourierRunner.run(["stats", "--json"], databaseURL: databaseURL)
        XCTAssertEqual(stats.status, 0, stats.stderr)

        // A second demo beside it, on the same console address: one line, exit 2, nothing more.
        let second = try CourierRunner.run(["demo", "--web-address", address], databaseURL: nil)
        XCTAssertEqual(second.status, 2, second.stderr)
        XCTAssertEqual(second.stderr.split(separator: "\n").count, 1, second.stderr)
        XCTAssertTrue(second.stderr.contains(address) && second.stderr.contains("--web-address"), second.stderr)
        XCTAssertEqual(second.stdout, "")

        // Ctrl-C: the cluster and the password file go.
        XCTAssertEqual(kill(pid, SIGINT), 0)
        var status: Int32 = 0
        let exitDeadline = Date().addingTimeInterval(60)
        var exited = false
        while Date() < exitDeadline {
            if waitpid(pid, &status, WNOHANG) == pid {
                exited = true
                break
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        XCTAssertTrue(exited, "the demo did not exit after SIGINT")
        if exited { pid = 0 }
        XCTAssertFalse(FileManager.default.fileExists(atPath: passwordFile), "\(passwordFile) is left")
        let clusters = try FileManager.default.contentsOfDirectory(atPath: temporary.path)
            .filter { $0.hasPrefix("courier-cluster-") }
        XCTAssertEqual(clusters, [], "a cluster directory is left")
        if let connection = try? PostgresConnection(databaseURL + "?connect_timeout=2") {
            connection.close()
            XCTFail("the kept cluster still answers after Ctrl-C")
        }
    }

    /// Starts the real binary with stdout to `stdout`, stderr to a file, TMPDIR of its own.
    private func spawn(_ arguments: [String], stdout: Int32) throws -> pid_t {
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = temporary.path
        environment.removeValue(forKey: "COURIER_DATABASE_URL")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_addopen(&actions, 2, temporary.appendingPathComponent("stderr").path,
                                         O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv: [UnsafeMutablePointer<CChar>?] = ([CourierBinary.path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, CourierBinary.path, &actions, nil, argv, envp)
        guard spawned == 0 else { throw CocoaError(.executableLoad) }
        return child
    }
}
