import CourierTesting
import Foundation
import XCTest

/// `courier worker --tls-ca-file` (and `COURIER_TLS_CA_FILE`) refuses, at start, a file it
/// cannot use, naming where the setting came from: a worker that started with it would
/// dead-letter every HTTPS delivery as a TLS failure. (That a readable CA is trusted is
/// `BenchTLSTests`: the `tls` scenario's deliveries all succeed through it.)
final class TLSCAFileTests: XCTestCase {
    func testUnreadableOrEmptyCAFileIsAUsageErrorNamingItsSource() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let notPEM = directory.appendingPathComponent("not.pem").path
        try "not a certificate\n".write(toFile: notPEM, atomically: true, encoding: .utf8)
        let missing = directory.appendingPathComponent("missing.pem").path
        let cases: [(arguments: [String], environment: [String: String], says: String)] = [
            (["--tls-ca-file", missing], [:], "--tls-ca-file: cannot read \(missing)"),
            (["--tls-ca-file", notPEM], [:], "--tls-ca-file: \(notPEM) holds no PEM certificate"),
            ([], ["COURIER_TLS_CA_FILE": notPEM], "COURIER_TLS_CA_FILE: \(notPEM) holds no PEM certificate"),
        ]
        for (arguments, environment, says) in cases {
            let result = try CourierRunner.run(["worker"] + arguments, databaseURL: nil, environment: environment)
            XCTAssertEqual(result.status, 2, "\(arguments) \(environment): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(says), "\(arguments) \(environment): \(result.stderr)")
        }
    }
}
