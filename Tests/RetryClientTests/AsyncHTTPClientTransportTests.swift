import Foundation
import RetryClient
import XCTest

/// Both production transports (`AsyncHTTPClientTransport` and the worker's
/// `PooledHTTPTransport`) against a real server on 127.0.0.1: every test runs once per
/// transport, each with a server of its own.
final class AsyncHTTPClientTransportTests: XCTestCase {
    private var server: LoopbackServer!
    private var transport: (any ProductionTransport)!

    /// Runs `body` once per transport kind, with a fresh server and a transport whose
    /// timeouts are 1 s; failures name the kind.
    private func forEachTransport(
        excerptLimit: Int = Defaults.maximumExcerptBytes,
        _ body: (TransportKind) async throws -> Void
    ) async throws {
        for kind in TransportKind.allCases {
            server = try await LoopbackServer.start()
            transport = kind.make(totalTimeout: .seconds(1), connectTimeout: .seconds(1), excerptLimit: excerptLimit)
            do {
                try await body(kind)
            } catch {
                XCTFail("\(kind): \(error)")
            }
            try await transport.shutdown()
            try await server.stop()
        }
        transport = nil
        server = nil
    }

    private func expectTransportError(
        _ url: String,
        _ kind: TransportError.Kind,
        file: StaticString = #filePath,
        line: UInt = #line
    ) async -> TransportError? {
        do {
            let answer = try await transport.send(OutboundRequest(method: "GET", url: url))
            XCTFail("\(transport!): expected \(kind), got \(answer)", file: file, line: line)
            return nil
        } catch let error as TransportError {
            XCTAssertEqual(error.kind, kind, "\(transport!): \(error)", file: file, line: line)
            return error
        } catch {
            XCTFail("\(transport!): not a TransportError: \(error)", file: file, line: line)
            return nil
        }
    }

    func testDefaultsAreTheDocumentedOnes() {
        let defaults = AsyncHTTPClientTransport.Configuration()
        XCTAssertEqual(defaults.connectTimeout, .seconds(10))
        XCTAssertEqual(defaults.totalTimeout, .seconds(30))
        XCTAssertEqual(defaults.maximumExcerptBytes, 20_000)
        XCTAssertFalse(defaults.followRedirects)
        XCTAssertEqual(defaults.maximumConnectionsPerHost, 32)
    }

    func testOkResponseIsSummarized() async throws {
        try await forEachTransport { _ in
            let summary = try await transport.send(
                OutboundRequest(
                    url: server.url("/ok"), headers: ["content-type": "application/json"], body: Array("{}".utf8))
            )
            XCTAssertEqual(summary.status, 200)
            XCTAssertEqual(summary.reason, "OK")
            XCTAssertEqual(summary.bodyExcerpt, Array("hello".utf8))
            XCTAssertFalse(summary.bodyTruncated)
            XCTAssertEqual(summary.header("CONTENT-LENGTH"), "5")
        }
    }

    func testErrorStatusIsAResponseNotAnError() async throws {
        try await forEachTransport { _ in
            let summary = try await transport.send(OutboundRequest(url: server.url("/status/503")))
            XCTAssertEqual(summary.status, 503)
        }
    }

    func testHangingServerGivesReadTimeout() async throws {
        try await forEachTransport { _ in
            let started = ContinuousClock.now
            _ = await expectTransportError(server.url("/hang"), .readTimeout)
            XCTAssertLessThan(ContinuousClock.now - started, .seconds(3))
        }
    }

    func testPerRequestTimeoutOverridesTheDefault() async throws {
        try await forEachTransport { _ in
            let started = ContinuousClock.now
            do {
                _ = try await transport.send(OutboundRequest(url: server.url("/hang"), timeout: .milliseconds(300)))
                XCTFail("expected a timeout")
            } catch let error as TransportError {
                XCTAssertEqual(error.kind, .readTimeout)
            }
            XCTAssertLessThan(ContinuousClock.now - started, .milliseconds(900))
        }
    }

    func testNothingListeningGivesConnectRefused() async throws {
        try await forEachTransport { _ in
            let port = try await LoopbackServer.refusedPort()
            let started = ContinuousClock.now
            _ = await expectTransportError("http://127.0.0.1:\(port)/ok", .connectRefused)
            XCTAssertLessThan(ContinuousClock.now - started, .milliseconds(900))
        }
    }

    func testResetConnectionGivesConnectionReset() async throws {
        try await forEachTransport { _ in
            _ = await expectTransportError(server.url("/reset"), .connectionReset)
        }
    }

    func testHugeBodyIsTruncatedToTheExcerptQuickly() async throws {
        try await forEachTransport { _ in
            let started = ContinuousClock.now
            let summary = try await transport.send(OutboundRequest(method: "GET", url: server.url("/big")))
            XCTAssertEqual(summary.status, 200)
            XCTAssertEqual(summary.bodyExcerpt.count, 20_000)
            XCTAssertTrue(summary.bodyTruncated)
            XCTAssertTrue(summary.bodyExcerpt.allSatisfy { $0 == UInt8(ascii: "x") })
            XCTAssertLessThan(ContinuousClock.now - started, .seconds(2))
            // The client is still usable afterwards.
            let next = try await transport.send(OutboundRequest(url: server.url("/ok")))
            XCTAssertEqual(next.status, 200)
        }
    }

    func testBodyExactlyAtTheLimitIsNotTruncatedAndOneMoreByteIs() async throws {
        for (limit, excerpt, truncated) in [(5, "hello", false), (4, "hell", true), (0, "", true)] {
            try await forEachTransport(excerptLimit: limit) { kind in
                let summary = try await transport.send(OutboundRequest(method: "GET", url: server.url("/ok")))
                XCTAssertEqual(summary.bodyExcerpt, Array(excerpt.utf8), "\(kind), limit \(limit)")
                XCTAssertEqual(summary.bodyTruncated, truncated, "\(kind), limit \(limit)")
            }
        }
    }

    func testRedirectIsReturnedNotFollowed() async throws {
        try await forEachTransport { _ in
            let summary = try await transport.send(OutboundRequest(url: server.url("/redirect")))
            XCTAssertEqual(summary.status, 302)
            XCTAssertEqual(summary.header("location"), "/ok")
            XCTAssertEqual(server.paths, ["/redirect"])
        }
    }

    func testTLSHandshakeWithAPlainHTTPServerIsATLSFailure() async throws {
        try await forEachTransport { _ in
            let url = server.url("/ok").replacingOccurrences(of: "http://", with: "https://")
            _ = await expectTransportError(url, .tlsFailure)
            XCTAssertEqual(server.paths, [])
        }
    }

    func testMalformedURLsAreInvalidRequests() async throws {
        try await forEachTransport { _ in
            _ = await expectTransportError("not a url", .invalidRequest)
            _ = await expectTransportError("http:///nohost", .invalidRequest)
            _ = await expectTransportError("ftp://127.0.0.1/file", .invalidRequest)
        }
    }

    func testRetryingClientRetriesARefusedConnectionThenGivesUp() async throws {
        try await forEachTransport { _ in
            let port = try await LoopbackServer.refusedPort()
            let client = RetryingClient(
                transport: transport,
                interceptor: Interceptor(retriers: [instantPolicy(retryLimit: 2)])
            )
            let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:\(port)/ok"))
            guard case .gaveUp(let reason, let last, 3) = outcome else { return XCTFail("got \(outcome)") }
            XCTAssertEqual(last.transportError?.kind, .connectRefused)
            XCTAssertTrue(reason.hasPrefix("retry limit reached after 3 attempts: connectRefused"), reason)
        }
    }

    func testSignedDeliveryReachesTheServer() async throws {
        try await forEachTransport { _ in
            let signer = try StandardWebhookSigner(secrets: [StandardWebhookSignerTests.secret])
            let client = RetryingClient(
                transport: transport,
                interceptor: Interceptor(adapters: [signer], retriers: [RetryPolicy()])
            )
            let outcome = await client.send(
                OutboundRequest(url: server.url("/ok"), headers: ["webhook-id": "msg_2"], body: Array("{}".utf8))
            )
            guard case .delivered(let summary, 1) = outcome else { return XCTFail("got \(outcome)") }
            XCTAssertEqual(summary.bodyExcerpt, Array("hello".utf8))
        }
    }
}
