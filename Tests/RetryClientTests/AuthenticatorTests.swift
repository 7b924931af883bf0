import Foundation
import RetryClient
import RetryClientTesting
import XCTest

final class AuthenticatorTests: XCTestCase {
    /// A stub that accepts only `Bearer <valid>`.
    private func server(accepting valid: String) -> StubTransport {
        StubTransport { request, _ in
            request.headers["Authorization"] == "Bearer \(valid)" ? response(200) : response(401)
        }
    }

    private func client(_ stub: StubTransport, _ auth: Authenticator) -> RetryingClient {
        RetryingClient(transport: stub, interceptor: Interceptor(adapters: [auth], retriers: [auth, instantPolicy()]))
    }

    func testUnauthorizedRefreshesOnceThenSucceedsWithTheNewToken() async {
        let refreshes = Counter()
        let auth = Authenticator(token: "old") {
            refreshes.increment()
            return "new"
        }
        let stub = server(accepting: "new")
        let outcome = await client(stub, auth).send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        guard case .delivered(_, 2) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertEqual(refreshes.value, 1)
        XCTAssertEqual(stub.requests.map { $0.headers["authorization"] }, ["Bearer old", "Bearer new"])
        let token = await auth.token
        XCTAssertEqual(token, "new")
    }

    func testConcurrentUnauthorizedRequestsShareOneRefresh() async {
        let refreshes = Counter()
        let auth = Authenticator(token: "old") {
            refreshes.increment()
            try await Task.sleep(for: .milliseconds(200))
            return "new"
        }
        let stub = server(accepting: "new")
        let client = client(stub, auth)
        async let first = client.send(OutboundRequest(url: "http://127.0.0.1:9/a"))
        async let second = client.send(OutboundRequest(url: "http://127.0.0.1:9/b"))
        let outcomes = await [first, second]
        for outcome in outcomes {
            guard case .delivered = outcome else { return XCTFail("got \(outcome)") }
        }
        XCTAssertEqual(refreshes.value, 1)
        let refreshCount = await auth.refreshCount
        XCTAssertEqual(refreshCount, 1)
        XCTAssertEqual(stub.requests.filter { $0.headers["Authorization"] == "Bearer new" }.count, 2)
    }

    func testRequestSentWithAReplacedTokenRetriesWithoutRefreshing() async {
        let refreshes = Counter()
        let auth = Authenticator(token: "old") {
            refreshes.increment()
            return "new"
        }
        // A request sent with "old" fails; meanwhile another request already refreshed.
        let refreshedElsewhere = await auth.retry(
            OutboundRequest(url: "http://127.0.0.1:9/", headers: ["Authorization": "Bearer old"]),
            context: AttemptContext(attempt: 1),
            failure: .response(response(401))
        )
        XCTAssertEqual(refreshedElsewhere, .retry)
        XCTAssertEqual(refreshes.value, 1)
        let late = await auth.retry(
            OutboundRequest(url: "http://127.0.0.1:9/", headers: ["Authorization": "Bearer old"]),
            context: AttemptContext(attempt: 1),
            failure: .response(response(401))
        )
        XCTAssertEqual(late, .retry)
        XCTAssertEqual(refreshes.value, 1)
    }

    func testRefreshFailureGivesUpWithThatError() async {
        struct RefreshDenied: Error, CustomStringConvertible {
            var description: String { "identity provider said no" }
        }
        let refreshes = Counter()
        let auth = Authenticator(token: "old") {
            refreshes.increment()
            throw RefreshDenied()
        }
        let stub = server(accepting: "new")
        let outcome = await client(stub, auth).send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        guard case .gaveUp(let reason, let last, 1) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertEqual(reason, "token refresh failed: identity provider said no")
        XCTAssertEqual(last.response?.status, 401)
        XCTAssertEqual(refreshes.value, 1)
        XCTAssertEqual(stub.callCount, 1)
    }

    func testSecondUnauthorizedAfterRefreshIsFinal() async {
        let refreshes = Counter()
        let auth = Authenticator(token: "old") {
            "fresh-\(refreshes.increment())"
        }
        let stub = server(accepting: "never")
        let outcome = await client(stub, auth).send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        guard case .gaveUp(let reason, _, 2) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertTrue(reason.contains("after a token refresh"), reason)
        XCTAssertEqual(refreshes.value, 1)
        XCTAssertEqual(stub.requests.map { $0.headers["Authorization"] }, ["Bearer old", "Bearer fresh-1"])
    }

    func testOtherFailuresAreLeftToTheNextRetrier() async {
        let auth = Authenticator(token: "t") { "u" }
        let decision = await auth.retry(
            OutboundRequest(url: "http://127.0.0.1:9/"),
            context: AttemptContext(attempt: 1),
            failure: .response(response(503))
        )
        XCTAssertEqual(decision, .doNotRetry)
    }
}
