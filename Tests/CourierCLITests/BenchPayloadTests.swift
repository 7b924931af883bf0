import CourierBench
import CourierTesting
import Foundation
import XCTest

/// `courier bench --payload-bytes`: the drain-like scenarios' bodies at a chosen size, each
/// still one JSON event, so a benchmark can weigh what a larger webhook costs.
final class BenchPayloadTests: XCTestCase {
    func testEachPayloadIsOneJSONEventOfExactlyTheSizeAsked() throws {
        let small = BenchRunner.payload(7)
        XCTAssertEqual(BenchRunner.payload(7, bytes: 0), small)
        XCTAssertLessThan(small.count, 256)
        for size in [256, 1_000, 4_096, 65_536, 1_048_576] {
            let body = BenchRunner.payload(42, bytes: size)
            XCTAssertEqual(body.count, size)
            let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any], "\(size)")
            XCTAssertEqual(object["type"] as? String, "invoice.paid")
            XCTAssertEqual(object["id"] as? String, "evt_0000000042")
            let note = try XCTUnwrap(object["note"] as? String)
            XCTAssertTrue(note.utf8.allSatisfy { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }, "\(size)")
        }
        XCTAssertNotEqual(BenchRunner.payload(1, bytes: 4_096), BenchRunner.payload(2, bytes: 4_096))
    }

    func testADrainCarriesBodiesOfTheSizeAskedAndSaysSo() throws {
        let temporary = try benchTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: temporary) }
        let result = try CourierRunner.run(
            ["bench", "--scenarios", "drain", "--jobs", "300", "--payload-bytes", "4096", "--json"], databaseURL: nil,
            environment: ["TMPDIR": temporary.path])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        let report = try XCTUnwrap(try result.json() as? [String: Any])
        XCTAssertEqual((report["payload_bytes"] as? NSNumber)?.intValue, 4_096, "\(report)")
        let rows = report["scenarios"] as? [[String: Any]] ?? []
        XCTAssertEqual(rows.map { $0["name"] as? String }, ["drain"], "\(rows)")
        XCTAssertEqual((rows.first?["jobs"] as? NSNumber)?.intValue, 300, "\(rows)")
    }

    func testAPayloadSizeOutOfRangeIsRefusedBeforeAnythingStarts() throws {
        for size in ["100", "255", "1048577", "-1"] {
            let result = try CourierRunner.run(["bench", "--scenarios", "drain", "--payload-bytes=\(size)"], databaseURL: nil)
            XCTAssertNotEqual(result.status, 0, size)
            XCTAssertTrue(
                result.stderr.contains("--payload-bytes must be 0 (the ~200-byte event) or between 256 and 1048576"),
                "\(size): \(result.stderr)")
            XCTAssertFalse(result.stdout.contains("Starting a throwaway"), "nothing started: \(result.stdout)")
        }
    }
}
