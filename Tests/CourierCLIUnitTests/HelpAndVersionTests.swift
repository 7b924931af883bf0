import ArgumentParser
import CourierCLI
import CourierCore
import CourierTesting
import Foundation
import XCTest

/// `--help`, `-h`, `courier help <command>` and `--version` through the real binary. These need
/// no database: help never connects.
final class HelpAndVersionTests: XCTestCase {
    private func run(_ arguments: [String]) throws -> CommandResult {
        try CourierRunner.run(arguments, databaseURL: nil)
    }

    private func assertHelp(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try run(arguments)
        let shown = arguments.joined(separator: " ")
        XCTAssertEqual(result.status, 0, "courier \(shown): \(result.stderr)", file: file, line: line)
        XCTAssertEqual(result.stderr, "", "courier \(shown)", file: file, line: line)
        XCTAssertTrue(
            result.stdout.contains("USAGE: courier"), "courier \(shown): \(result.stdout)", file: file, line: line)
        XCTAssertTrue(result.stdout.contains("Example"), "courier \(shown) shows no example", file: file, line: line)
        XCTAssertFalse(result.stdout.contains("CommandError"), file: file, line: line)
    }

    func testEveryCommandAndSubcommandHasHelpWithAnExample() throws {
        let paths = Courier.allCommandPaths
        // The tree as configured; a new command shows up here without editing this test.
        for expected in [["jobs", "list"], ["queues", "set"], ["enqueue"]] { XCTAssertTrue(paths.contains(expected)) }
        XCTAssertGreaterThanOrEqual(paths.count, 20)
        try assertHelp(["--help"])
        try assertHelp(["-h"])
        try assertHelp(["help"])
        for path in paths {
            try assertHelp(path + ["--help"])
            try assertHelp(path + ["-h"])
            try assertHelp(["help"] + path)
        }
    }

    func testHelpNamesTheCommandItDescribes() throws {
        let result = try run(["jobs", "show", "--help"])
        XCTAssertTrue(result.stdout.contains("USAGE: courier jobs show"), result.stdout)
        let viaHelp = try run(["help", "dead", "requeue"])
        XCTAssertTrue(viaHelp.stdout.contains("USAGE: courier dead requeue"), viaHelp.stdout)
    }

    /// ArgumentParser wraps at 80 columns: a discussion line it had to wrap came out broken
    /// mid-sentence; a default said in the flag's help came out twice.
    func testHelpLinesAreNotRewrappedAndDefaultsAreSaidOnce() throws {
        for path in [[]] + Courier.allCommandPaths {
            let result = try run(path + ["--help"])
            XCTAssertNil(
                result.stdout.range(of: #"\(default [^)]*\)\.? *\(default: "#, options: .regularExpression),
                "courier \(path.joined(separator: " ")) says a default twice")
        }
        // Every discussion's own prose lines fit, so ArgumentParser never breaks one mid-sentence.
        func walk(_ command: any ParsableCommand.Type) {
            let name = command.configuration.commandName ?? "\(command)"
            // Prose only: indented examples and SQL are commands to copy, kept whole.
            for line in command.configuration.discussion.split(separator: "\n")
            where line.count > 80 && !line.hasPrefix(" ") && !line.hasPrefix("SQL:") {
                XCTFail("courier \(name): discussion line longer than 80 columns: \(line)")
            }
            command.configuration.subcommands.forEach(walk)
        }
        walk(Courier.self)
        XCTAssertTrue(try run(["--help"]).stdout.contains("4 database schema missing"))
    }

    func testBenchHelpKeepsItsOwnLinesAtEightyColumns() throws {
        // ArgumentParser wraps at 80 columns; a longer line in the text came out as a line and
        // a stray word ("synchronous_commit" alone, then "on)").
        let result = try run(["bench", "--help"])
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertTrue(lines.contains("synchronous_commit on) unless --database-url is given, and a fast HTTP"), result.stdout)
        XCTAssertTrue(lines.contains("  swift build -c release && .build/release/courier bench"), result.stdout)
        XCTAssertFalse(lines.contains("on) unless --database-url is given, and a fast HTTP sink on 127.0.0.1 unless"))
    }

    func testVersionPrintsTheVersionAndTheSchemaItExpects() throws {
        let result = try run(["--version"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        let schema = EmbeddedMigrations.all.map(\.version).max() ?? 0
        XCTAssertGreaterThan(schema, 0)
        XCTAssertEqual(
            result.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
            "courier \(CourierVersion.number) (schema \(schema))")
    }

    /// The binary allocates through jemalloc, not glibc's malloc: asked for its statistics at
    /// exit (`MALLOC_CONF`, read only by jemalloc), it prints them. Without the link the option
    /// means nothing and stderr stays empty.
    func testTheBinaryAllocatesThroughJemalloc() throws {
        let result = try CourierRunner.run(
            ["--version"], databaseURL: nil, environment: ["MALLOC_CONF": "stats_print:true"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.hasPrefix("courier "), result.stdout)
        XCTAssertTrue(result.stderr.contains("Begin jemalloc statistics"), String(result.stderr.prefix(300)))
    }

    func testUnknownCommandsAndFlagsAreStillUsageErrors() throws {
        let unknown = try run(["frobnicate"])
        XCTAssertEqual(unknown.status, 2, unknown.stderr)
        XCTAssertEqual(unknown.stderr.split(separator: "\n").count, 1, unknown.stderr)
        XCTAssertTrue(unknown.stderr.hasPrefix("error: "), unknown.stderr)
        let badFlag = try run(["jobs", "list", "--no-such-flag"])
        XCTAssertEqual(badFlag.status, 2, badFlag.stderr)
        XCTAssertTrue(badFlag.stderr.contains("--no-such-flag"), badFlag.stderr)
    }
}
