import CourierCore
import Foundation
import XCTest

/// The migrations compiled into the binary are the files of `Migrations/`, byte for byte.
final class EmbeddedMigrationsTests: XCTestCase {
    func testEmbeddedMigrationsMatchTheMigrationsFolder() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Migrations")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".sql") && $0.first?.isNumber == true }.sorted()
        // schema.sql is the generated whole (SchemaFileTests), not a migration.
        XCTAssertFalse(EmbeddedMigrations.all.contains { $0.fileName == "schema.sql" })
        XCTAssertEqual(EmbeddedMigrations.all.map(\.fileName), files)
        for migration in EmbeddedMigrations.all {
            let onDisk = try String(contentsOf: folder.appendingPathComponent(migration.fileName), encoding: .utf8)
            XCTAssertEqual(migration.sql, onDisk, "\(migration.fileName) differs from the embedded copy: rebuild")
        }
    }
}
