import CourierTesting
import Foundation
import XCTest

final class DemoTests: XCTestCase {
    func testDemoExitsZeroAndShowsSucceededRetriedAndDeadJobs() throws {
        _ = try TestDatabase.serverURL()  // the demo needs the server binaries the test command installs
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments = ["demo"]
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        waitForExit(process)
        XCTAssertEqual(process.terminationStatus, 0, stdout + stderr)
        XCTAssertTrue(stdout.contains("Summary: 5 succeeded (2 after retries), 1 dead, 0 unsettled."), stdout)
        XCTAssertTrue(stdout.contains("/reject"), stdout)
        XCTAssertTrue(stdout.contains("dead"), stdout)
    }
}
