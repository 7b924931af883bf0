import Foundation
import RetryClient
import RetryClientTesting
import XCTest

final class RetryingClientTests: XCTestCase {
    /// The table of the seeds: the stub fails with `notConnected` until its N-th request and
    /// succeeds from then on (N = 0: never). With 5 retries (6 attempts) N = 1...6 is delivered
    /// with exactly N requests; N = 0 and N = 7 give up after exactly 6.
    func testSucceedsOnRequestNWithinSixAttemptsAndGivesUpOtherwise() async {
        for n in 0...7 {
            let stub = StubTransport { _, index in
                if n != 0 && index + 1 >= n { return response(200) }
                throw TransportError(kind: .notConnected, message: "offline")
            }
            let client = RetryingClient(
                transport: stub,
                interceptor: Interceptor(retriers: [instantPolicy(kinds: [.notConnected])])
            )
            let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
            switch (n, outcome) {
            case (1...6, .delivered(let delivered, let attempts)):
                XCTAssertEqual(delivered.status, 200, "N=\(n)")
                XCTAssertEqual(attempts, n, "N=\(n)")
                XCTAssertEqual(stub.callCount, n, "N=\(n)")
            case (0, .gaveUp(let reason, let last, let attempts)), (7, .gaveUp(let reason, let last, let attempts)):
                XCTAssertEqual(attempts, 6, "N=\(n)")
                XCTAssertEqual(stub.callCount, 6, "N=\(n)")
                XCTAssertEqual(reason, "retry limit reached after 6 attempts: notConnected: offline")
                XCTAssertEqual(last.transportError?.kind, .notConnected)
            default:
                XCTFail("N=\(n): unexpected outcome \(outcome)")
            }
        }
    }

    func testBadRequestIsNotRetried() async {
        let stub = StubTransport { _, _ in HTTPResponseSummary(status: 400, reason: "Bad Request") }
        let client = RetryingClient(transport: stub, interceptor: Interceptor(retriers: [instantPolicy()]))
        let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        guard case .gaveUp(let reason, let last, let attempts) = outcome else {
            return XCTFail("expected gaveUp, got \(outcome)")
        }
        XCTAssertEqual(stub.callCount, 1)
        XCTAssertEqual(attempts, 1)
        XCTAssertEqual(reason, "HTTP 400 Bad Request")
        XCTAssertEqual(last.response?.status, 400)
    }

    func testRedirectStatusIsAFailureNotRetriedByDefault() async {
        let stub = StubTransport { _, _ in response(302, ["Location": "http://127.0.0.1:9/elsewhere"]) }
        let client = RetryingClient(transport: stub, interceptor: Interceptor(retriers: [instantPolicy()]))
        let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        guard case .gaveUp(_, let last, _) = outcome else { return XCTFail("expected gaveUp, got \(outcome)") }
        XCTAssertEqual(last.response?.status, 302)
        XCTAssertEqual(stub.callCount, 1)
    }

    func testServiceUnavailableIsRetriedThenDelivered() async {
        let stub = StubTransport { _, index in index < 2 ? response(503) : response(204) }
        let client = RetryingClient(transport: stub, interceptor: Interceptor(retriers: [instantPolicy()]))
        let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        guard case .delivered(let delivered, let attempts) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertEqual(delivered.status, 204)
        XCTAssertEqual(attempts, 3)
    }

    func testNoRetriersMeansOneAttempt() async {
        let stub = StubTransport { _, _ in throw TransportError(kind: .connectRefused, message: "refused") }
        let client = RetryingClient(transport: stub)
        let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        guard case .gaveUp(let reason, _, 1) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertEqual(reason, "connectRefused: refused")
        XCTAssertEqual(stub.callCount, 1)
    }

    func testNonTransportErrorFromTransportBecomesOther() async {
        let stub = StubTransport { _, _ in throw SampleError(retryable: true) }
        let client = RetryingClient(transport: stub, interceptor: Interceptor(retriers: [instantPolicy()]))
        let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        guard case .gaveUp(_, let last, let attempts) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertEqual(last.transportError?.kind, .other)
        // `other` is retried like any failure without a usable answer (DeliveryPolicy).
        XCTAssertEqual(attempts, 6)
    }

    func testFailingAdapterStopsWithoutSending() async throws {
        let signer = try StandardWebhookSigner(secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])
        let stub = StubTransport { _, _ in response(200) }
        let client = RetryingClient(
            transport: stub,
            interceptor: Interceptor(adapters: [signer], retriers: [instantPolicy()])
        )
        // No webhook-id header: the signer cannot sign.
        let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook", body: Array("{}".utf8)))
        guard case .gaveUp(let reason, .adapter, 1) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertTrue(reason.contains("no webhook-id"), reason)
        XCTAssertEqual(stub.callCount, 0)
    }

    func testLongRetryDelayReturnsRetryLaterWithoutSleeping() async {
        let stub = StubTransport { _, _ in response(503, ["Retry-After": "120"]) }
        let client = RetryingClient(
            transport: stub,
            interceptor: Interceptor(retriers: [instantPolicy()]),
            maximumInProcessDelay: .seconds(1)
        )
        let started = ContinuousClock.now
        let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        let elapsed = ContinuousClock.now - started
        guard case .retryLater(let after, _, let last, let attempts) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertEqual(after, .seconds(120))
        XCTAssertEqual(outcome.retryDelay, .seconds(120))
        XCTAssertEqual(outcome.retryAfterHeader, "120")
        XCTAssertEqual(last.response?.status, 503)
        XCTAssertEqual(attempts, 1)
        XCTAssertEqual(stub.callCount, 1)
        XCTAssertLessThan(elapsed, .milliseconds(500))
    }

    func testShortRetryDelayIsWaitedInProcess() async {
        let stub = StubTransport { _, index in index == 0 ? response(429) : response(200) }
        let policy = RetryPolicy(exponentialBackoffScale: .milliseconds(200), jitter: .none)
        let client = RetryingClient(transport: stub, interceptor: Interceptor(retriers: [policy]))
        let started = ContinuousClock.now
        let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        let elapsed = ContinuousClock.now - started
        guard case .delivered(_, 2) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(190))
    }

    func testCancellationDuringInProcessWaitReturnsRetryLater() async {
        /// The policy's decision, fulfilling `decided` once it is made: from then on the client
        /// only sleeps, so a cancellation lands in the wait.
        struct Announcing: RequestRetrier {
            var policy: RetryPolicy
            var decided: XCTestExpectation
            func retry(_ request: OutboundRequest, context: AttemptContext, failure: AttemptFailure) async
                -> RetryDecision
            {
                let decision = await policy.retry(request, context: context, failure: failure)
                decided.fulfill()
                return decision
            }
        }
        let stub = StubTransport { _, _ in response(503) }
        let policy = RetryPolicy(exponentialBackoffScale: .seconds(30), maximumBackoff: .seconds(30), jitter: .none)
        let decided = expectation(description: "the retrier decided to wait 30 s")
        let client = RetryingClient(
            transport: stub,
            interceptor: Interceptor(retriers: [Announcing(policy: policy, decided: decided)]),
            maximumInProcessDelay: .seconds(60)
        )
        let task = Task { await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook")) }
        await fulfillment(of: [decided], timeout: 10)
        task.cancel()
        let outcome = await task.value
        guard case .retryLater(let after, let reason, _, 1) = outcome else { return XCTFail("got \(outcome)") }
        XCTAssertTrue(reason.hasPrefix("cancelled"), reason)
        // The wait was cut short, not slept out: part of it is still owed (a cancellation
        // before the wait owes nothing), and the request was not sent again.
        XCTAssertGreaterThan(after, .zero)
        XCTAssertLessThanOrEqual(after, .seconds(30))
        XCTAssertEqual(stub.callCount, 1)
    }

    func testAdaptersRunInOrderOnEveryAttempt() async {
        struct Tag: RequestAdapter {
            var value: String
            func adapt(_ request: OutboundRequest, context: AttemptContext) async throws -> OutboundRequest {
                var adapted = request
                adapted.headers.add("x-tag", "\(value)\(context.attempt)")
                return adapted
            }
        }
        let stub = StubTransport { _, index in index == 0 ? response(500) : response(200) }
        let client = RetryingClient(
            transport: stub,
            interceptor: Interceptor(adapters: [Tag(value: "a"), Tag(value: "b")], retriers: [instantPolicy()])
        )
        _ = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        XCTAssertEqual(stub.requests.map { $0.headers.values("X-Tag") }, [["a1", "b1"], ["a2", "b2"]])
    }

    func testFirstRetrierWithAnOpinionWins() async {
        struct Fixed: RequestRetrier {
            var decision: RetryDecision
            func retry(_ request: OutboundRequest, context: AttemptContext, failure: AttemptFailure) async
                -> RetryDecision
            {
                decision
            }
        }
        let stub = StubTransport { _, _ in response(500) }
        let client = RetryingClient(
            transport: stub,
            interceptor: Interceptor(retriers: [
                Fixed(decision: .doNotRetry), Fixed(decision: .doNotRetryWithError(reason: "second says stop")),
                Fixed(decision: .retry),
            ])
        )
        let outcome = await client.send(OutboundRequest(url: "http://127.0.0.1:9/hook"))
        guard case .gaveUp("second says stop", _, 1) = outcome else { return XCTFail("got \(outcome)") }
    }
}
