import Foundation
import RetryClient
import RetryClientTesting
import XCTest

/// OAuth2 client credentials through the typed client, and the fetching ``Authenticator``.
final class OAuth2ClientCredentialsTests: XCTestCase {
    private let credentials = OAuth2ClientCredentials(
        tokenURL: "https://id.example.com/oauth/token", clientID: "my client", clientSecret: "p@ss:word",
        scope: "hooks.write read", audience: "https://api.example.com")

    func testTokenRequestIsAFormPostWithBasicCredentials() async throws {
        let stub = StubTransport { _, _ in tokenAnswer("abc") }
        let started = ContinuousClock.now
        let token = try await OAuth2TokenClient(credentials: credentials, transport: stub).fetchToken()
        XCTAssertEqual(token.value, "abc")
        let usable = try XCTUnwrap(token.usableUntil)
        // One hour, used until 30 s before its end.
        XCTAssertGreaterThanOrEqual(usable, started + .seconds(3570))
        XCTAssertLessThanOrEqual(usable, ContinuousClock.now + .seconds(3570))
        let sent = try XCTUnwrap(stub.requests.first)
        XCTAssertEqual(sent.method, "POST")
        XCTAssertEqual(sent.url, "https://id.example.com/oauth/token")
        XCTAssertEqual(sent.headers["Content-Type"], "application/x-www-form-urlencoded")
        // RFC 6749 §2.3.1: id and secret form-encoded, then joined and base64-encoded.
        XCTAssertEqual(
            sent.headers["Authorization"], "Basic " + Data("my+client:p%40ss%3Aword".utf8).base64EncodedString())
        XCTAssertEqual(
            String(decoding: sent.body ?? [], as: UTF8.self),
            "grant_type=client_credentials&scope=hooks.write+read&audience=https%3A%2F%2Fapi.example.com")
        var body = credentials
        body.authentication = .body
        let inBody = StubTransport { _, _ in tokenAnswer("abc") }
        _ = try await OAuth2TokenClient(credentials: body, transport: inBody).fetchToken()
        XCTAssertNil(inBody.requests.first?.headers["Authorization"])
        XCTAssertTrue(
            String(decoding: inBody.requests.first?.body ?? [], as: UTF8.self)
                .hasSuffix("&client_id=my+client&client_secret=p%40ss%3Aword"))
    }

    func testRefreshMarginIsTenPercentAtMostThirtySeconds() {
        let now = ContinuousClock.now
        XCTAssertEqual(AccessToken.expiring("t", in: .seconds(3600), now: now).usableUntil, now + .seconds(3570))
        XCTAssertEqual(AccessToken.expiring("t", in: .seconds(60), now: now).usableUntil, now + .seconds(54))
        XCTAssertFalse(AccessToken.expiring("t", in: .seconds(60), now: now).isUsable(at: now + .seconds(55)))
        XCTAssertTrue(AccessToken(value: "t").isUsable(at: now + .seconds(1_000_000)))
    }

    func testExpiresInAsAStringAndNoExpiry() throws {
        let decoder = JSONDecoder()
        XCTAssertEqual(
            try decoder.decode(OAuth2TokenResponse.self, from: Data(#"{"access_token":"a","expires_in":"120"}"#.utf8)).expiresIn, .seconds(120))
        XCTAssertNil(try decoder.decode(OAuth2TokenResponse.self, from: Data(#"{"access_token":"a"}"#.utf8)).expiresIn)
    }

    func testRejectedCredentialsArePermanentAndNeverPrintTheSecret() async {
        let stub = StubTransport { _, _ in
            HTTPResponseSummary(
                status: 401, reason: "Unauthorized",
                bodyExcerpt: Array(#"{"error":"invalid_client","error_description":"bad secret p@ss:word"}"#.utf8))
        }
        do {
            _ = try await OAuth2TokenClient(credentials: credentials, transport: stub).fetchToken()
            XCTFail("no error")
        } catch {
            XCTAssertEqual(error.description, "oauth token request to https://id.example.com/oauth/token failed: 401 invalid_client")
            XCTAssertTrue(error.isPermanent)
        }
        XCTAssertFalse("\(credentials)".contains("p@ss"), "\(credentials)")
        var dumped = ""
        dump(credentials, to: &dumped)
        XCTAssertFalse(dumped.contains("p@ss"), dumped)
    }

    func testOutagesAreTransient() async {
        typealias Answer = @Sendable () throws -> HTTPResponseSummary
        let cases: [(Answer, Bool)] = [
            ({ HTTPResponseSummary(status: 503) }, false),
            ({ HTTPResponseSummary(status: 429) }, false),
            ({ throw TransportError(kind: .connectRefused, message: "Connection refused") }, false),
            ({ throw TransportError(kind: .readTimeout, message: "deadline") }, false),
            ({ HTTPResponseSummary(status: 400, bodyExcerpt: Array(#"{"error":"invalid_scope"}"#.utf8)) }, true),
            ({ HTTPResponseSummary(status: 200, bodyExcerpt: Array(#"{"token_type":"Bearer"}"#.utf8)) }, true),
            ({ HTTPResponseSummary(status: 200, bodyExcerpt: Array(#"{"access_token":"a","token_type":"mac"}"#.utf8)) }, true),
        ]
        for (answer, permanent) in cases {
            let stub = StubTransport { _, _ in try answer() }
            do {
                _ = try await OAuth2TokenClient(credentials: credentials, transport: stub).fetchToken()
                XCTFail("no error")
            } catch {
                XCTAssertEqual(error.isPermanent, permanent, error.description)
            }
        }
    }

    func testFetchingAuthenticatorSharesOneFetchAmongConcurrentRequests() async {
        let fetches = Counter()
        let auth = Authenticator {
            let n = fetches.increment()
            try await Task.sleep(for: .milliseconds(200))
            return AccessToken(value: "tok-\(n)")
        }
        let stub = StubTransport { request, _ in
            request.headers["Authorization"] == "Bearer tok-1" ? response(200) : response(401)
        }
        let client = RetryingClient(transport: stub, interceptor: Interceptor(adapters: [auth], retriers: [auth]))
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    guard case .delivered = await client.send(OutboundRequest(url: "http://127.0.0.1:9/")) else {
                        return XCTFail("not delivered")
                    }
                }
            }
        }
        XCTAssertEqual(fetches.value, 1)
        XCTAssertEqual(stub.callCount, 50)
    }

    func testExpiredTokenIsFetchedAgainBeforeTheRequest() async throws {
        let clock = ManualClock()
        let fetches = Counter()
        let auth = Authenticator(now: { clock.now }) {
            let n = fetches.increment()
            return AccessToken.expiring("tok-\(n)", in: .seconds(60), now: clock.now)
        }
        let request = OutboundRequest(url: "http://127.0.0.1:9/")
        let first = try await auth.adapt(request, context: AttemptContext(attempt: 1))
        clock.advance(.seconds(50))
        let second = try await auth.adapt(request, context: AttemptContext(attempt: 1))
        clock.advance(.seconds(5))
        let third = try await auth.adapt(request, context: AttemptContext(attempt: 1))
        XCTAssertEqual(
            [first, second, third].map { $0.headers["Authorization"] }, ["Bearer tok-1", "Bearer tok-1", "Bearer tok-2"])
        XCTAssertEqual(fetches.value, 2)
    }

    func testUnauthorizedDiscardsTheTokenAndTheRetryFetchesOnce() async {
        let fetches = Counter()
        let auth = Authenticator { AccessToken(value: "tok-\(fetches.increment())") }
        let stub = StubTransport { request, _ in
            request.headers["Authorization"] == "Bearer tok-2" ? response(200) : response(401)
        }
        let client = RetryingClient(transport: stub, interceptor: Interceptor(adapters: [auth], retriers: [auth]))
        guard case .delivered(_, 2) = await client.send(OutboundRequest(url: "http://127.0.0.1:9/")) else {
            return XCTFail("not delivered on the second request")
        }
        XCTAssertEqual(fetches.value, 2)
        XCTAssertEqual(stub.requests.map { $0.headers["Authorization"] }, ["Bearer tok-1", "Bearer tok-2"])
        // A 401 with the fresh token is final: no loop.
        let never = StubTransport { _, _ in response(401) }
        let stuck = RetryingClient(transport: never, interceptor: Interceptor(adapters: [auth], retriers: [auth]))
        guard case .gaveUp(_, _, 2) = await stuck.send(OutboundRequest(url: "http://127.0.0.1:9/")) else {
            return XCTFail("expected to give up after one retry")
        }
        XCTAssertEqual(fetches.value, 3)
    }

    func testAFailedFetchFailsTheAttemptWithTheFetchError() async {
        let auth = Authenticator {
            throw OAuth2TokenError(
                tokenURL: "https://user:pw@id.example.com/t?secret=x",
                underlying: .transport(TransportError(kind: .connectRefused, message: "refused"), retryAfter: nil))
        }
        let stub = StubTransport { _, _ in response(200) }
        let outcome = await RetryingClient(transport: stub, interceptor: Interceptor(adapters: [auth], retriers: [auth]))
            .send(OutboundRequest(url: "http://127.0.0.1:9/"))
        guard case .gaveUp(_, .adapter(let error as OAuth2TokenError), 1) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertFalse(error.isPermanent)
        XCTAssertEqual(error.description, "oauth token request to https://***@id.example.com/t failed: connectRefused: refused")
        XCTAssertEqual(stub.callCount, 0, "nothing is sent without a token")
    }
}

/// A clock a test moves by hand.
private final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current = ContinuousClock.now
    var now: ContinuousClock.Instant { lock.withLock { current } }
    func advance(_ by: Duration) { lock.withLock { current += by } }
}

/// A token endpoint's success, for stubs.
private func tokenAnswer(_ token: String) -> HTTPResponseSummary {
    HTTPResponseSummary(
        status: 200, bodyExcerpt: Array(#"{"access_token":"\#(token)","token_type":"Bearer","expires_in":3600}"#.utf8))
}
