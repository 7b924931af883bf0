import CourierCLISupport
import CourierTesting
import Foundation
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `courier web` as an operator starts it: it refuses to run without a usable password or on a
/// database of another schema, serves on the address given, and stops on SIGTERM.
final class WebCommandTests: CLITestCase {
    private static let secret = "tr0ub4dor&3-horse-staple"

    private func passwordFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("courier-web-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        else { throw CocoaError(.fileWriteUnknown, userInfo: ["path": path]) }
        return path
    }

    func testRefusesToStartWithoutAUsablePasswordOrOnAnotherSchema() throws {
        assertFails(try courier("web"), code: 2, mentioning: "--password-file")
        assertFails(try courier("web", "--password-file", "/nonexistent/web.password"), code: 1, mentioning: "/nonexistent/web.password")
        let short = try passwordFile("hunter2\n")
        defer { try? FileManager.default.removeItem(atPath: short) }
        let refused = try courier("web", "--password-file", short)
        assertFails(refused, code: 2, mentioning: "at least 12 characters")
        XCTAssertFalse(refused.stderr.contains("hunter2"))
        let good = try passwordFile(Self.secret + "\n")
        defer { try? FileManager.default.removeItem(atPath: good) }
        assertFails(try courier("web", "--password-file", good, "--address", "nowhere"), code: 2, mentioning: "HOST:PORT")
        assertFails(try courier("web", "--password-file", good, "--connections", "0"), code: 2, mentioning: "--connections")
        assertFails(try courier("web", "--password-file", good, "--log-level", "loud"), code: 2, mentioning: "--log-level")

        let empty = try TestDatabase.createEmpty(label: "webempty")
        defer { TestDatabase.drop(empty) }
        let unmigrated = try CourierRunner.run(["web", "--password-file", good], databaseURL: empty)
        assertFails(unmigrated, code: 4, mentioning: "courier migrate")
    }

    func testServesOnTheAddressGivenAndStopsOnSIGTERM() throws {
        let file = try passwordFile(Self.secret + "\n")
        defer { try? FileManager.default.removeItem(atPath: file) }
        let port = try ThrowawayCluster.freePort()
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("courier-web-\(UUID().uuidString).log")
        XCTAssertTrue(FileManager.default.createFile(atPath: log.path, contents: nil), log.path)
        defer { try? FileManager.default.removeItem(at: log) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments = ["web", "--log-format", "text"]
        var environment = ProcessInfo.processInfo.environment
        environment["COURIER_DATABASE_URL"] = databaseURL
        environment["COURIER_WEB_ADDRESS"] = "127.0.0.1:\(port)"
        environment["COURIER_WEB_PASSWORD_FILE"] = file
        process.environment = environment
        process.standardError = try FileHandle(forWritingTo: log)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        let deadline = Date().addingTimeInterval(30)
        var login = 0
        while login != 200 && Date() < deadline {
            login = Self.status("http://127.0.0.1:\(port)/login")
            if login != 200 { Thread.sleep(forTimeInterval: 0.1) }
        }
        XCTAssertEqual(login, 200, "the console answered on the address from COURIER_WEB_ADDRESS")
        XCTAssertEqual(Self.status("http://127.0.0.1:\(port)/queues"), 401)

        kill(process.processIdentifier, SIGTERM)
        waitForExit(process, timeout: .seconds(20))
        XCTAssertFalse(process.isRunning, "SIGTERM stops it")
        XCTAssertEqual(process.terminationStatus, 0)
        let output = String(decoding: (try? Data(contentsOf: log)) ?? Data(), as: UTF8.self)
        XCTAssertTrue(output.contains("listening"), output)
        XCTAssertFalse(output.contains(Self.secret), "the password never reaches the log")
    }

    /// The status of a GET, or 0 when nothing answered.
    private static func status(_ url: String) -> Int {
        let semaphore = DispatchSemaphore(value: 0)
        let box = StatusBox()
        URLSession.shared.dataTask(with: URL(string: url)!) { _, response, _ in
            box.value = (response as? HTTPURLResponse)?.statusCode ?? 0
            semaphore.signal()
        }.resume()
        _ = semaphore.wait(timeout: .now() + 5)
        return box.value
    }
}

private final class StatusBox: @unchecked Sendable {
    var value = 0
}
