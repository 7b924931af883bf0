import CourierTesting
import Foundation
import XCTest

@testable import CourierCLI
@testable import CourierCLISupport

/// The files of `deploy/`: systemd accepts every unit, each points at its documentation, and
/// the example settings work for a `DynamicUser=` service with `ProtectHome=`.
final class DeployUnitTests: XCTestCase {
    private let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy")

    private func unitFiles() throws -> [String] {
        let kinds = [".service", ".timer", ".socket", ".path", ".target"]
        return try FileManager.default.contentsOfDirectory(atPath: deploy.path)
            .filter { name in kinds.contains { name.hasSuffix($0) } }.sorted()
    }

    private func exampleSettings() throws -> [String: String] {
        let text = try String(contentsOf: deploy.appendingPathComponent("worker.env.example"), encoding: .utf8)
        var settings: [String: String] = [:]
        for raw in text.split(separator: "\n") {
            // Commented-out settings (`#COURIER_RETENTION=7d`) are examples too: they must work
            // once uncommented.
            let line = raw.hasPrefix("#COURIER_") ? raw.dropFirst() : raw[...]
            guard line.hasPrefix("COURIER_"), let equals = line.firstIndex(of: "=") else { continue }
            settings[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return settings
    }

    func testEveryUnitPassesSystemdAnalyzeVerifyAndHasDocumentation() throws {
        guard
            let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
                .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else {
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                return XCTFail("systemd-analyze is missing (apt-get install systemd)")
            }
            throw XCTSkip("systemd-analyze is not installed (apt-get install systemd); unit files not verified")
        }
        let units = try unitFiles()
        XCTAssertTrue(units.contains("courier-worker.service") && units.contains("courier-worker@.service"), "\(units)")
        let binary = CourierBinary.path
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: binary), binary)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "courier-units-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        for unit in units {
            let text = try String(contentsOf: deploy.appendingPathComponent(unit), encoding: .utf8)
            let documentation = text.split(separator: "\n").filter { $0.hasPrefix("Documentation=") }
            XCTAssertFalse(documentation.isEmpty, "\(unit) has no Documentation= line")
            // verify checks that ExecStart is executable: point it at the binary just built.
            let local = text.replacingOccurrences(of: "/usr/local/bin/courier", with: binary)
            if unit.hasSuffix(".service") {
                XCTAssertNotEqual(local, text, "\(unit) does not run /usr/local/bin/courier")
            }
            var copies = [unit]
            if unit.contains("@.") { copies.append(unit.replacingOccurrences(of: "@.", with: "@billing.")) }
            for copy in copies {
                let path = directory.appendingPathComponent(copy).path
                try Data(local.utf8).write(to: URL(fileURLWithPath: path))
                let result = try runTool(analyze, ["verify", path])
                XCTAssertEqual(result.status, 0, "\(copy): \(result.output)")
                // Unknown keys and bad values are only warnings (exit 0): any output is a failure.
                XCTAssertEqual(result.output.trimmingCharacters(in: .whitespacesAndNewlines), "", "\(copy)")
            }
        }
    }

    func testExampleSettingsUseUnitsAndATLSRootThatNeedsNoHome() throws {
        let settings = try exampleSettings()
        for key in [
            "COURIER_GRACE_PERIOD", "COURIER_RETENTION", "COURIER_POLL_INTERVAL", "COURIER_LEASE",
            "COURIER_REQUEST_TIMEOUT", "COURIER_CONNECT_TIMEOUT",
        ] {
            guard let value = settings[key] else { continue }
            XCTAssertNotNil(DurationParser.seconds(value), "\(key)=\(value) is not a duration the worker takes")
        }
        let url = try XCTUnwrap(settings["COURIER_DATABASE_URL"])
        let query = try XCTUnwrap(URLComponents(string: url)?.queryItems)
        let parameters = Dictionary(query.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        XCTAssertEqual(parameters["sslmode"], "verify-full")
        // Without sslrootcert libpq reads ~/.postgresql/root.crt, out of reach of a DynamicUser=
        // service with ProtectHome=.
        let root = try XCTUnwrap(parameters["sslrootcert"])
        XCTAssertTrue(root.hasPrefix("/"), root)
        for hidden in ["/home", "/root", "/run/user"] { XCTAssertFalse(root.hasPrefix(hidden), root) }
    }

    /// Against a server that says yes to TLS and then stays silent, libpq gets as far as
    /// loading the root certificates: with the example's parameters it loads them and waits for
    /// the handshake (until connect_timeout), where a missing file fails at once.
    func testExampleTLSParametersLoadTheirRootCertificates() async throws {
        let settings = try exampleSettings()
        let exampleQuery = try XCTUnwrap(settings["COURIER_DATABASE_URL"]?.split(separator: "?", maxSplits: 1).last)
        let server = try await RawTCPServer.start(script: .respond(Array("S".utf8)))
        let base = "postgresql://courier@127.0.0.1:\(server.port)/courier?connect_timeout=2&"

        let missing = try CourierRunner.run(
            ["jobs", "list"], databaseURL: base + "sslmode=verify-full&sslrootcert=/nonexistent/ca.crt")
        XCTAssertEqual(missing.status, 1, missing.stderr)
        XCTAssertTrue(
            missing.stderr.contains("/nonexistent/ca.crt"),
            "the server must get libpq to load certificates: \(missing.stderr)")

        let example = try CourierRunner.run(["jobs", "list"], databaseURL: base + exampleQuery)
        XCTAssertEqual(example.status, 1, example.stderr)
        XCTAssertFalse(example.stderr.contains("root.crt"), example.stderr)
        XCTAssertFalse(example.stderr.contains("certificate file"), example.stderr)
        XCTAssertGreaterThanOrEqual(server.connections, 2)
        try await server.stop()
    }
}
