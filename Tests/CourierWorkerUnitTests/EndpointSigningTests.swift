import CourierCore
import CourierSecrets
import Foundation
import Logging
import RetryClient
import RetryClientTesting
import XCTest

@testable import CourierWorker

/// How `HTTPDeliverer` signs a webhook endpoint's delivery: with every valid secret of the
/// endpoint (opened with the worker's key), instead of the queue's; and what happens when it
/// cannot open them. Only the transport is swapped.
final class EndpointSigningTests: XCTestCase {
    private let key = try! SecretsKey(bytes: (0..<32).map { UInt8($0) })

    private func deliver(_ job: ClaimedJob, key: SecretsKey?) async -> (Delivery, StubTransport) {
        let transport = StubTransport { _, _ in HTTPResponseSummary(status: 204) }
        var configuration = HTTPDelivererConfiguration()
        configuration.allowPrivateTargets = true
        configuration.secretsKey = key
        let deliverer = HTTPDeliverer(configuration: configuration, transport: transport, logger: Logger(label: "test"))
        return (await deliverer.deliver(job), transport)
    }

    private func job(endpoint: Int64, secrets: [String], queueSecret: String? = nil) -> ClaimedJob {
        ClaimedJob(
            id: 9, queue: "webhooks", method: "POST", url: "http://127.0.0.1:9/hook",
            headers: [("webhook-id", "msg_5"), ("Content-Type", "application/json")], body: Array(#"{"a":1}"#.utf8),
            attempt: 1, maxAttempts: 3, schedule: .standardWebhooks, signingSecret: queueSecret, queueMaxInFlight: nil,
            endpointID: endpoint, sealedEndpointSecrets: secrets.map { key.seal($0, endpointID: endpoint) })
    }

    func testEveryValidSecretSignsAndTheQueueSecretIsNotUsed() async throws {
        let new = SecretsKey.newWebhookSecret()
        let old = SecretsKey.newWebhookSecret()
        let queue = SecretsKey.newWebhookSecret()
        let (delivery, transport) = await deliver(job(endpoint: 4, secrets: [new, old], queueSecret: queue), key: key)
        XCTAssertEqual(delivery.verdict.action, .succeed)
        let request = try XCTUnwrap(transport.requests.first)
        XCTAssertEqual(request.headers["webhook-id"], "msg_5", "the message's id, not the job's")
        let timestamp = try XCTUnwrap(request.headers["webhook-timestamp"].flatMap { Int64($0) })
        let expected = try [new, old].map {
            try StandardWebhookSigner.sign(secret: $0, id: "msg_5", timestamp: timestamp, body: request.body ?? [])
        }
        XCTAssertEqual(request.headers["webhook-signature"], expected.joined(separator: " "))
    }

    func testWithoutTheKeyOrWithAnotherKeyNothingIsSentAndTheJobWaits() async throws {
        let sealed = job(endpoint: 4, secrets: [SecretsKey.newWebhookSecret()])
        let (missing, notSent) = await deliver(sealed, key: nil)
        XCTAssertEqual(notSent.callCount, 0)
        XCTAssertEqual(missing.verdict, DeliveryPolicy.verdict(for: .secretUnavailable))
        XCTAssertEqual(missing.verdict.action, .retryLater)
        XCTAssertEqual(missing.verdict.destination, .none, "not the receiver's fault")
        XCTAssertTrue(missing.error?.contains("COURIER_SECRETS_KEY_FILE") ?? false, missing.error ?? "")

        let other = try SecretsKey(bytes: [UInt8](repeating: 1, count: 32))
        let (wrong, stillNotSent) = await deliver(sealed, key: other)
        XCTAssertEqual(stillNotSent.callCount, 0)
        XCTAssertEqual(wrong.verdict.action, .retryLater)
        XCTAssertTrue(wrong.error?.contains("sealed with another key") ?? false, wrong.error ?? "")

        // A sealed secret moved onto another endpoint does not open either.
        var moved = sealed
        moved.endpointID = 5
        let (refused, _) = await deliver(moved, key: key)
        XCTAssertEqual(refused.verdict.action, .retryLater)
    }

    func testTheKeyFileIsOneLineOfBase64ForThirtyTwoBytes() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func write(_ text: String) throws -> String {
            let path = directory.appendingPathComponent(UUID().uuidString).path
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            return path
        }
        let good = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        XCTAssertNoThrow(try SecretsKey.load(path: try write(good + "\n")))
        XCTAssertNoThrow(try SecretsKey.load(path: try write("  " + good + "  \n\n")))
        let cases: [(String, String)] = [
            ("", "one line of base64"), ("not base64!\n", "one line of base64"),
            (good + "\n" + good + "\n", "one line of base64"),
            (Data([1, 2, 3]).base64EncodedString(), "32 bytes in base64, got 3"),
            (Data(count: 64).base64EncodedString(), "got 64"),
        ]
        for (text, fragment) in cases {
            XCTAssertThrowsError(try SecretsKey.load(path: try write(text)), text) { error in
                XCTAssertTrue("\(error)".contains(fragment), "\(error)")
                XCTAssertTrue("\(error)".contains("openssl rand -base64 32"), "\(error)")
            }
        }
        XCTAssertThrowsError(try SecretsKey.load(path: directory.appendingPathComponent("none").path)) { error in
            XCTAssertTrue("\(error)".contains("No such file or directory"), "\(error)")
        }
        // Sealing is not deterministic, and opening gives the secret back.
        let secret = SecretsKey.newWebhookSecret()
        XCTAssertTrue(secret.hasPrefix("whsec_"))
        XCTAssertEqual(Data(base64Encoded: String(secret.dropFirst(6)))?.count, 32)
        let a = key.seal(secret, endpointID: 1)
        XCTAssertNotEqual(a, key.seal(secret, endpointID: 1))
        XCTAssertEqual(try key.open(a, endpointID: 1), secret)
        XCTAssertFalse(String(decoding: a, as: UTF8.self).contains(String(secret.dropFirst(6))))
    }
}
