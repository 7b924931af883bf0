import CourierTesting
import Foundation
import XCTest

/// `scripts/demo`, the README's first command: its help, and the dependency check it shares
/// with scripts/test (scripts/lib/packages.sh), run on a PATH where libpq cannot be found.
///
/// The PATH starts with a folder of stand-ins: `pkg-config` finds nothing, `id` answers the
/// user id the test wants, and `apt-get` writes down how it was called and fails, so the test
/// never installs anything, whoever runs it. Nothing is built: the check comes first.
final class DemoScriptTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    private var standIns: URL!

    override func setUpWithError() throws {
        standIns = FileManager.default.temporaryDirectory.appendingPathComponent("demo-script-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: standIns, withIntermediateDirectories: true)
    }

    override func tearDown() {
        if let standIns { try? FileManager.default.removeItem(at: standIns) }
    }

    private var script: String { root.appendingPathComponent("scripts/demo").path }
    private var aptCalls: URL { standIns.appendingPathComponent("apt-get.calls") }

    /// Writes an executable shell script `name` into the stand-ins folder.
    private func standIn(_ name: String, _ body: String) throws {
        let path = standIns.appendingPathComponent(name).path
        guard FileManager.default.createFile(
            atPath: path, contents: Data("#!/bin/sh\n\(body)\n".utf8), attributes: [.posixPermissions: 0o755])
        else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
    }

    /// Runs scripts/demo with `arguments` as user id `uid` (as `id -u` tells it), with a PATH of
    /// the stand-ins and the system's folders only (no swift).
    private func runDemo(_ arguments: [String], uid: Int) throws -> CommandResult {
        try standIn("pkg-config", "exit 1")
        try standIn("id", #"if [ "$1" = "-u" ]; then echo \#(uid); else exec /usr/bin/id "$@"; fi"#)
        try standIn("apt-get", #"echo "$*" >> '\#(aptCalls.path)'; exit 100"#)
        let environment = ["PATH": "\(standIns.path):/usr/bin:/bin", "HOME": standIns.path, "LANG": "C.UTF-8"]
        return try runProgram(script, arguments, environment: environment)
    }

    private func aptGetCalls() -> [String] {
        ((try? String(contentsOf: aptCalls, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func testHelpSaysWhatItDoesWithoutCheckingOrBuilding() throws {
        let result = try runDemo(["--help"], uid: 1000)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.hasPrefix("usage: scripts/demo [courier demo options]"), result.stdout)
        XCTAssertTrue(result.stdout.contains("apt-get"), result.stdout)
        XCTAssertTrue(result.stdout.contains("courier demo --help"), result.stdout)
        XCTAssertEqual(result.stderr, "")
        XCTAssertEqual(aptGetCalls(), [])
    }

    func testWithoutRootAMissingPackageIsOneLineNamingItAndExitOne() throws {
        let result = try runDemo(["--keep"], uid: 1000)
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertEqual(result.stderrLines.count, 1, result.stderr)
        XCTAssertTrue(result.stderr.hasPrefix("scripts/demo: missing packages: "), result.stderr)
        XCTAssertTrue(result.stderr.contains("apt-get install -y "), result.stderr)
        XCTAssertTrue(result.stderr.contains("libpq-dev"), result.stderr)
        XCTAssertTrue(result.stderr.contains("libjemalloc-dev"), result.stderr)
        XCTAssertEqual(result.stdout, "")
        XCTAssertEqual(aptGetCalls(), [], "apt-get was called without root")
    }

    func testAsRootTheMissingPackageGoesToAptGetAndAFailedInstallStopsTheScript() throws {
        let result = try runDemo(["--keep"], uid: 0)
        XCTAssertNotEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("scripts/demo: installing "), result.stderr)
        let calls = aptGetCalls()
        XCTAssertTrue(calls.first?.hasPrefix("install -y ") ?? false, "\(calls)")
        XCTAssertTrue(calls.first?.contains("libpq-dev") ?? false, "\(calls)")
        // It stopped at the failed install: never reached the build (swift is not on this PATH).
        XCTAssertFalse(result.stderr.contains("swift is not on the PATH"), result.stderr)
    }

    /// "Two commands are all the set-up": the README's first two commands are this script and
    /// scripts/test, the ones tested here and run by CI.
    func testTheReadmeSetsUpWithThisScriptAndScriptsTest() throws {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let blocks = readme.components(separatedBy: "```sh\n").dropFirst()
            .map { $0.components(separatedBy: "\n```").first ?? "" }
        XCTAssertEqual(Array(blocks.prefix(2)), ["scripts/demo", "scripts/test"])
    }
}
