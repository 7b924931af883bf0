import Foundation
import RetryClient
import RetryClientTesting
import XCTest

final class StandardWebhookSignerTests: XCTestCase {
    // The published Standard Webhooks example (also in the Svix libraries' tests).
    static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    static let id = "msg_p5jXN8AQM9LWM0D4loKWxJek"
    static let timestamp: Int64 = 1_614_265_330
    static let payload = Array(#"{"test": 2432232314}"#.utf8)
    static let signature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

    func testSignMatchesThePublishedVector() throws {
        let computed = try StandardWebhookSigner.sign(
            secret: Self.secret,
            id: Self.id,
            timestamp: Self.timestamp,
            body: Self.payload
        )
        XCTAssertEqual(computed, Self.signature)
        // The prefix is optional.
        XCTAssertEqual(
            try StandardWebhookSigner.sign(
                secret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                id: Self.id,
                timestamp: Self.timestamp,
                body: Self.payload
            ),
            Self.signature
        )
    }

    func testAdapterSetsTheThreeHeaders() async throws {
        let signer = try StandardWebhookSigner(
            secrets: [Self.secret],
            now: { Date(timeIntervalSince1970: 1_614_265_330.7) }
        )
        let request = OutboundRequest(url: "http://127.0.0.1:9/", headers: ["webhook-id": Self.id], body: Self.payload)
        let signed = try await signer.adapt(request, context: AttemptContext(attempt: 1))
        XCTAssertEqual(signed.headers.values("webhook-id"), [Self.id])
        XCTAssertEqual(signed.headers["webhook-timestamp"], "1614265330")
        XCTAssertEqual(signed.headers["webhook-signature"], Self.signature)
    }

    func testRotationSignsWithEverySecret() async throws {
        let other = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()
        let signer = try StandardWebhookSigner(
            secrets: [Self.secret, other],
            messageID: { _ in Self.id },
            now: { Date(timeIntervalSince1970: 1_614_265_330) }
        )
        let signed = try await signer.adapt(
            OutboundRequest(url: "http://127.0.0.1:9/", body: Self.payload),
            context: AttemptContext(attempt: 1)
        )
        let parts = try XCTUnwrap(signed.headers["webhook-signature"]).split(separator: " ").map(String.init)
        XCTAssertEqual(parts.count, 2)
        XCTAssertEqual(parts[0], Self.signature)
        XCTAssertEqual(
            parts[1],
            try StandardWebhookSigner.sign(secret: other, id: Self.id, timestamp: Self.timestamp, body: Self.payload)
        )
        XCTAssertNotEqual(parts[0], parts[1])
    }

    func testInvalidSecretsAreRejectedClearly() {
        XCTAssertThrowsError(try StandardWebhookSigner(secrets: ["whsec_not base64!"])) { error in
            XCTAssertEqual("\(error)", "webhook signing secret is not whsec_ followed by base64")
        }
        XCTAssertThrowsError(try StandardWebhookSigner(secrets: ["whsec_"]))
        XCTAssertThrowsError(try StandardWebhookSigner(secrets: []))
        XCTAssertThrowsError(try StandardWebhookSigner.sign(secret: "%%%", id: "x", timestamp: 1, body: []))
    }

    /// What the receiver saw across retries: the same id, a fresh timestamp per attempt, and a
    /// signature that verifies for each attempt's timestamp.
    func testStubSeesStableIdAndPerAttemptTimestamps() async throws {
        let clock = Counter()
        let signer = try StandardWebhookSigner(
            secrets: [Self.secret],
            now: { Date(timeIntervalSince1970: TimeInterval(1_700_000_000 + 10 * clock.increment())) }
        )
        let stub = StubTransport { _, index in index < 2 ? response(500) : response(200) }
        let client = RetryingClient(
            transport: stub,
            interceptor: Interceptor(adapters: [signer], retriers: [instantPolicy()])
        )
        let outcome = await client.send(
            OutboundRequest(url: "http://127.0.0.1:9/hook", headers: ["webhook-id": "msg_1"], body: Self.payload)
        )
        guard case .delivered(_, 3) = outcome else { return XCTFail("got \(outcome)") }
        let seen = stub.requests
        XCTAssertEqual(seen.map { $0.headers["webhook-id"] }, ["msg_1", "msg_1", "msg_1"])
        XCTAssertEqual(seen.map { $0.headers["webhook-timestamp"] }, ["1700000010", "1700000020", "1700000030"])
        for request in seen {
            let timestamp = try XCTUnwrap(Int64(XCTUnwrap(request.headers["webhook-timestamp"])))
            XCTAssertEqual(
                request.headers["webhook-signature"],
                try StandardWebhookSigner.sign(
                    secret: Self.secret, id: "msg_1", timestamp: timestamp, body: Self.payload)
            )
        }
    }
}
