import CourierCLISupport
import CourierTesting
import Foundation
import XCTest

/// `courier worker --body-budget` (and `COURIER_BODY_BUDGET`): sizes as people write them, and
/// one usage error line, naming where the setting came from, for anything else.
final class BodyBudgetFlagTests: XCTestCase {
    func testSizesReadAsBytes() {
        XCTAssertEqual(ByteSizeParser.bytes("1048576"), 1_048_576)
        XCTAssertEqual(ByteSizeParser.bytes("64MiB"), 64 * 1_048_576)
        XCTAssertEqual(ByteSizeParser.bytes("64mb"), 64 * 1_048_576)
        XCTAssertEqual(ByteSizeParser.bytes("512KiB"), 512 * 1024)
        XCTAssertEqual(ByteSizeParser.bytes("2 GiB"), 2 * 1_073_741_824)
        XCTAssertEqual(ByteSizeParser.bytes("300b"), 300)
        for text in ["", "MiB", "-1MiB", "1.5MiB", "64 parsecs", "0x10", "99999999999999999999GiB", "9223372036854775807k"] {
            XCTAssertNil(ByteSizeParser.bytes(text), text)
        }
    }

    func testAnUnreadableOrZeroBudgetIsAUsageErrorNamingItsSource() throws {
        let cases: [(arguments: [String], environment: [String: String], says: String)] = [
            (["--body-budget", "lots"], [:], #"--body-budget: "lots" is not a size"#),
            (["--body-budget", "0"], [:], #"--body-budget: "0" is not a size"#),
            ([], ["COURIER_BODY_BUDGET": "1.5GiB"], #"COURIER_BODY_BUDGET: "1.5GiB" is not a size"#),
        ]
        for (arguments, environment, says) in cases {
            let result = try CourierRunner.run(["worker"] + arguments, databaseURL: nil, environment: environment)
            XCTAssertEqual(result.status, 2, "\(arguments) \(environment): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(says), "\(arguments) \(environment): \(result.stderr)")
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
        }
    }
}
