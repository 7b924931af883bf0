import Foundation
import XCTest

/// Rules of the repository's layout that a reader relies on (docs/architecture.md): SQL lives in
/// `Migrations/` and `CourierCore`'s statements, every document a source points to is in the
/// repository, and temporary files go where `TMPDIR` says.
final class RepositoryRulesTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// Every Swift file under `folder` (`Sources/` unless told), as (path relative to the root, text).
    private func sources(_ folder: String = "Sources") throws -> [(String, String)] {
        let base = root.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { return [] }
        var files: [(String, String)] = []
        for case let url as URL in walker where url.pathExtension == "swift" {
            // Sources/CourierCore/Migrations is a link to Migrations/: those are SQL files.
            let relative = String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1))
            files.append((relative, try String(contentsOf: url, encoding: .utf8)))
        }
        XCTAssertGreaterThan(files.count, 50, "the walk found the sources")
        return files
    }

    /// SQL statements are recognised by what every one of ours contains.
    private static let sqlShapes = [
        #"\bSELECT\b[^\n]*\bFROM\s+courier\."#, #"\bINSERT INTO\s+courier\."#, #"\bUPDATE\s+courier\."#,
        #"\bDELETE FROM\s+courier\."#, #"\bVACUUM\b"#, #"\bCHECKPOINT\b"#, #"\bANALYZE\s+courier\."#,
    ].map { try! NSRegularExpression(pattern: $0) }

    func testSQLTextLivesOnlyInCourierCore() throws {
        // Postgres issues its own protocol commands (BEGIN, LISTEN); CourierTesting is test code;
        // CourierClient, the producer library on postgres-nio, holds its own calls of the SQL API
        // so a producer's build needs no libpq.
        let allowed = ["Sources/CourierCore/", "Sources/Postgres/", "Sources/CourierTesting/", "Sources/CourierClient/"]
        var offenders: [String] = []
        for (path, text) in try sources() where !allowed.contains(where: path.hasPrefix) {
            var inHelpSQL = false
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = String(line)
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                // Help texts show operators the SQL equivalent of a command (an `SQL:` line and
                // its continuation lines); they run nothing. Doc comments describe statements.
                if trimmed.hasPrefix("SQL:") { inHelpSQL = true; continue }
                if inHelpSQL && !trimmed.isEmpty && !trimmed.contains("\"") { continue }
                inHelpSQL = false
                if trimmed.hasPrefix("///") { continue }
                let range = NSRange(line.startIndex..., in: line)
                if Self.sqlShapes.contains(where: { $0.firstMatch(in: line, range: range) != nil }) {
                    offenders.append("\(path):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        XCTAssertEqual(offenders, [], "SQL belongs in CourierCore's statements or Migrations/")
    }

    func testTheDetectorSeesSQL() {
        let line = #"try connection.query("SELECT count(*) FROM courier.jobs WHERE id = $1")"#
        let range = NSRange(line.startIndex..., in: line)
        XCTAssertTrue(Self.sqlShapes.contains { $0.firstMatch(in: line, range: range) != nil })
    }

    /// A reader must find every document a source points to in this repository (what they need
    /// of the design is in `docs/`, see docs/architecture.md): each Markdown file a source names
    /// exists here, and no source names a path above its own folder.
    func testSourcesCiteOnlyDocumentsOfTheRepository() throws {
        let markdown = try NSRegularExpression(pattern: #"[A-Za-z0-9_./-]+\.md\b"#)
        var offenders: [String] = []
        for (path, text) in try sources() {
            let range = NSRange(text.startIndex..., in: text)
            for match in markdown.matches(in: text, range: range) {
                let name = String(text[Range(match.range, in: text)!])
                let candidates = [root.appendingPathComponent(name), root.appendingPathComponent("docs/" + name)]
                if !candidates.contains(where: { FileManager.default.fileExists(atPath: $0.path) }) {
                    offenders.append("\(path) names \(name), which is not in the repository")
                }
            }
            if text.contains("../") { offenders.append("\(path) names a path above its folder") }
        }
        XCTAssertEqual(offenders, [])
    }

    /// The unit test targets run without PostgreSQL (docs/architecture.md, "Tests"): no file of
    /// theirs reaches for a database through the test helpers or the test environment, so a
    /// test that needs one cannot land in a target run without it (where it would be skipped).
    func testUnitTestTargetsNeverUseTheDatabase() throws {
        let tests = root.appendingPathComponent("Tests")
        let unitTargets = try FileManager.default.contentsOfDirectory(atPath: tests.path)
            .filter { $0.hasSuffix("UnitTests") || $0 == "CourierModelTests" || $0 == "RetryClientTests" }.sorted()
        XCTAssertEqual(
            unitTargets,
            ["CourierCLIUnitTests", "CourierCoreUnitTests", "CourierModelTests", "CourierWorkerUnitTests",
             "PostgresUnitTests", "RetryClientTests"],
            "a unit target was added or renamed: update docs/architecture.md (Tests) and this list")
        let databaseHelpers = [
            "TestDatabase", "JobsProbe", "OwnDatabaseTestCase", "CLITestCase", "WorkerTestCase",
            "COURIER_TEST_DATABASE_URL", "COURIER_TEST_PGDATA", "COURIER_TEST_PGCTL",
        ]
        let this = URL(fileURLWithPath: #filePath).standardizedFileURL.path
        var offenders: [String] = []
        var scanned = 0
        for target in unitTargets {
            let directory = tests.appendingPathComponent(target)
            guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else {
                continue
            }
            for case let url as URL in walker where url.pathExtension == "swift" && url.standardizedFileURL.path != this {
                scanned += 1
                let text = try String(contentsOf: url, encoding: .utf8)
                for helper in databaseHelpers where text.contains(helper) {
                    offenders.append("Tests/\(target)/\(url.lastPathComponent) uses \(helper)")
                }
            }
        }
        XCTAssertGreaterThan(scanned, 20, "the walk found the unit tests")
        XCTAssertEqual(offenders, [], "a test that needs PostgreSQL belongs in an integration target")
    }

    /// The code and its tests make temporary files only under the temporary directory
    /// (`TMPDIR`, through `NSTemporaryDirectory()` or `FileManager.temporaryDirectory`), never
    /// under a literal /tmp: scripts/test runs the tests with a `TMPDIR` of their own and fails
    /// when anything is left in it, a check that holds only if nothing goes around it.
    func testTemporaryFilesGoUnderTheTemporaryDirectory() throws {
        let literal = "\"/" + "tmp"
        let offenders = try (sources("Sources") + sources("Tests")).filter { $0.1.contains(literal) }.map(\.0)
        XCTAssertEqual(offenders, [], "use FileManager.default.temporaryDirectory or NSTemporaryDirectory()")
    }
}
