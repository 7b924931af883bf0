import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// `Migrations/schema.sql` is what the migrations produce: the embedded migrations are applied
/// to an empty database by the real `Migrator`, `scripts/schema --dump` dumps it (pg_dump with
/// the options and the normalization that wrote the file), and the output must equal the file.
final class SchemaFileTests: XCTestCase {
    func testSchemaFileMatchesTheMigrations() throws {
        let url = try TestDatabase.createEmpty(label: "schemafile")
        defer { TestDatabase.drop(url) }
        do {
            let connection = try PostgresConnection(url)
            defer { connection.close() }
            try Migrator().migrate(connection)
        }

        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let file = root.appendingPathComponent("Migrations/schema.sql")
        guard FileManager.default.fileExists(atPath: file.path) else {
            return XCTFail("Migrations/schema.sql is missing: run scripts/schema to regenerate it")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("out")
        let err = directory.appendingPathComponent("err")
        let script = root.appendingPathComponent("scripts/schema").path
        let status = runShellCommand(
            "\(shellQuoted(script)) --dump \(shellQuoted(url)) >\(shellQuoted(out.path)) 2>\(shellQuoted(err.path))")
        guard status == 0 else {
            let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
            return XCTFail("scripts/schema --dump failed (status \(status)): \(stderr)")
        }

        let expected = try String(contentsOf: file, encoding: .utf8)
        let actual = try String(contentsOf: out, encoding: .utf8)
        guard actual != expected else { return }
        let expectedLines = expected.split(separator: "\n", omittingEmptySubsequences: false)
        let actualLines = actual.split(separator: "\n", omittingEmptySubsequences: false)
        let index =
            zip(expectedLines, actualLines).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            ?? min(expectedLines.count, actualLines.count)
        let inFile = index < expectedLines.count ? String(expectedLines[index]) : "(end of file)"
        let produced = index < actualLines.count ? String(actualLines[index]) : "(end of output)"
        XCTFail(
            "Migrations/schema.sql differs from what the migrations produce, first at line \(index + 1): "
                + "the file has \(inFile.debugDescription), the migrations give \(produced.debugDescription). "
                + "Run scripts/schema to regenerate it (scripts/schema --check prints the whole diff).")
    }

    private func shellQuoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
