import CourierCLISupport
import Foundation
import XCTest

/// `Spawn.start` hands a child the environment it is given, or this process's.
final class SpawnEnvironmentTests: XCTestCase {
    private func run(_ script: String, environment: [String: String]?) throws -> String {
        let output = FileManager.default.temporaryDirectory
            .appendingPathComponent("spawn-environment-\(getpid())-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let pid = try Spawn.start(["/bin/sh", "-c", script], outputPath: output, append: false, environment: environment)
        XCTAssertEqual(Spawn.wait(pid), 0)
        return try String(contentsOfFile: output, encoding: .utf8)
    }

    func testTheChildGetsExactlyTheEnvironmentGiven() throws {
        // The value keeps its own equals signs; nothing of this process's environment is passed.
        setenv("COURIER_SPAWN_TEST_PARENT", "parent", 1)
        defer { unsetenv("COURIER_SPAWN_TEST_PARENT") }
        let output = try run(
            "printf '%s|%s' \"$GIVEN\" \"${COURIER_SPAWN_TEST_PARENT-unset}\"", environment: ["GIVEN": "a=b=c"])
        XCTAssertEqual(output, "a=b=c|unset")
    }

    func testWithoutOneTheChildInheritsThisProcesssEnvironment() throws {
        setenv("COURIER_SPAWN_TEST_VALUE", "inherited", 1)
        defer { unsetenv("COURIER_SPAWN_TEST_VALUE") }
        XCTAssertEqual(try run("printf '%s' \"$COURIER_SPAWN_TEST_VALUE\"", environment: nil), "inherited")
    }
}
