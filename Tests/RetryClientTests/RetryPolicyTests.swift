import Foundation
import RetryClient
import XCTest

final class RetryPolicyTests: XCTestCase {
    private func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// The retry client's policy is a view of CourierModel's `Backoff` (moved here from
    /// BackoffTests, which test `Backoff` alone in CourierModelTests).
    func testThePolicyIsAViewOfABackoff() {
        XCTAssertEqual(
            RetryPolicy(exponentialBackoffScale: .milliseconds(500), maximumBackoff: .seconds(60), jitter: .none).backoff,
            .exponential(initial: .milliseconds(500), base: 2, maximum: .seconds(60)))
    }

    func testDefaultDelaysFollowTheDocumentedCurveWithinJitterBounds() {
        let policy = RetryPolicy()
        var rng = SplitMix64(seed: 42)
        for _ in 0..<200 {
            for n in 1...10 {
                let nominal = min(60, 0.5 * pow(2, Double(n - 1)))
                let delay = seconds(policy.delay(forAttempt: n, using: &rng))
                XCTAssertGreaterThanOrEqual(delay, nominal * 0.8 - 1e-9, "attempt \(n)")
                XCTAssertLessThanOrEqual(delay, min(60, nominal * 1.2) + 1e-9, "attempt \(n)")
            }
        }
    }

    func testJitterActuallyVaries() {
        let policy = RetryPolicy()
        var rng = SplitMix64(seed: 7)
        let delays = Set((0..<20).map { _ in policy.delay(forAttempt: 3, using: &rng) })
        XCTAssertGreaterThan(delays.count, 10)
    }

    func testWithoutJitterTheDelaysAreExactAndTheCapHolds() {
        let policy = RetryPolicy(maximumBackoff: .seconds(5), jitter: .none)
        var rng = SplitMix64(seed: 1)
        let delays = (1...6).map { policy.delay(forAttempt: $0, using: &rng) }
        XCTAssertEqual(delays, [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(5), .seconds(5)])
    }

    func testCapHoldsAfterJitterForHugeAttemptNumbers() {
        let policy = RetryPolicy(maximumBackoff: .seconds(60), jitter: .proportional(0.5))
        var rng = SplitMix64(seed: 3)
        for n in [20, 100, 5_000] {
            XCTAssertLessThanOrEqual(policy.delay(forAttempt: n, using: &rng), .seconds(60))
        }
    }

    func testFullJitterStaysBetweenZeroAndTheNominalDelay() {
        let policy = RetryPolicy(jitter: .full)
        var rng = SplitMix64(seed: 9)
        for _ in 0..<100 {
            let delay = policy.delay(forAttempt: 4, using: &rng)
            XCTAssertGreaterThanOrEqual(delay, .zero)
            XCTAssertLessThanOrEqual(delay, .seconds(4))
        }
    }

    func testSeededSourcesRepeat() {
        let a = RetryPolicy(randomSource: .seeded(5))
        let b = RetryPolicy(randomSource: .seeded(5))
        XCTAssertEqual((1...5).map { a.delay(forAttempt: $0) }, (1...5).map { b.delay(forAttempt: $0) })
    }

    func testParsesRetryAfterDeltaSeconds() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        XCTAssertEqual(RetryPolicy.parseRetryAfter("120", now: now), .seconds(120))
        XCTAssertEqual(RetryPolicy.parseRetryAfter(" 0 ", now: now), .zero)
        XCTAssertNil(RetryPolicy.parseRetryAfter("-5", now: now))
        XCTAssertNil(RetryPolicy.parseRetryAfter("soon", now: now))
        XCTAssertNil(RetryPolicy.parseRetryAfter("", now: now))
    }

    func testParsesRetryAfterHTTPDate() {
        // Wed, 21 Oct 2015 07:28:00 GMT is 1445412480 seconds after the epoch.
        let now = Date(timeIntervalSince1970: 1_445_412_480 - 90)
        XCTAssertEqual(RetryPolicy.parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now: now), .seconds(90))
        XCTAssertEqual(
            RetryPolicy.parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now: Date(timeIntervalSince1970: 784_111_777)),
            .zero
        )
        XCTAssertEqual(RetryPolicy.parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now: .distantFuture), .zero)
        XCTAssertNil(RetryPolicy.parseRetryAfter("Wed, 21 Oct 2015 07:28:00 PST", now: now))
        XCTAssertNil(RetryPolicy.parseRetryAfter("Wed, 32 Oct 2015 07:28:00 GMT", now: now))
        XCTAssertNil(RetryPolicy.parseRetryAfter("Wednesday, 21-Oct-15 07:28:00 GMT", now: now))
    }

    func testRetryAfterDeltaLengthensTheBackoff() async {
        let policy = RetryPolicy(jitter: .none)
        let decision = await policy.retry(
            OutboundRequest(url: "http://127.0.0.1:9/"),
            context: AttemptContext(attempt: 1),
            failure: .response(response(429, ["retry-after": "120"]))
        )
        XCTAssertEqual(decision, .retryAfter(.seconds(120)))
    }

    func testRetryAfterHTTPDateIsHonoured() async {
        let now = Date(timeIntervalSince1970: 1_445_412_480 - 300)
        let policy = RetryPolicy(jitter: .none, now: { now })
        let decision = await policy.retry(
            OutboundRequest(url: "http://127.0.0.1:9/"),
            context: AttemptContext(attempt: 1),
            failure: .response(response(503, ["Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"]))
        )
        XCTAssertEqual(decision, .retryAfter(.seconds(300)))
    }

    func testRetryAfterNeverShortensTheBackoff() async {
        let policy = RetryPolicy(jitter: .none)
        let decision = await policy.retry(
            OutboundRequest(url: "http://127.0.0.1:9/"),
            context: AttemptContext(attempt: 4),
            failure: .response(response(503, ["Retry-After": "1"]))
        )
        XCTAssertEqual(decision, .retryAfter(.seconds(4)))
    }

    func testRetryAfterIsCappedAtMaximumRetryAfter() async {
        let policy = RetryPolicy(jitter: .none, maximumRetryAfter: .seconds(3600))
        let decision = await policy.retry(
            OutboundRequest(url: "http://127.0.0.1:9/"),
            context: AttemptContext(attempt: 1),
            failure: .response(response(429, ["Retry-After": "999999999"]))
        )
        XCTAssertEqual(decision, .retryAfter(.seconds(3600)))
    }

    func testClassifiesStatusesTransportErrorsAndMethods() async {
        let policy = instantPolicy()
        let post = OutboundRequest(url: "http://127.0.0.1:9/")
        func decide(_ failure: AttemptFailure, _ request: OutboundRequest = post) async -> RetryDecision {
            await policy.retry(request, context: AttemptContext(attempt: 1), failure: failure)
        }
        for status in [408, 425, 429, 500, 502, 503, 504] {
            let decision = await decide(.response(response(status)))
            XCTAssertEqual(decision, .retryAfter(.zero), "\(status)")
        }
        for status in [300, 302, 400, 401, 403, 404, 410, 422, 501] {
            let decision = await decide(.response(response(status)))
            XCTAssertEqual(decision, .doNotRetry, "\(status)")
        }
        for kind in TransportError.Kind.allCases {
            let decision = await decide(.transport(TransportError(kind: kind, message: "")))
            let expected: RetryDecision =
                RetryPolicy.defaultRetryableTransportErrorKinds.contains(kind) ? .retryAfter(.zero) : .doNotRetry
            XCTAssertEqual(decision, expected, "\(kind)")
        }
        let adapterDecision = await decide(.adapter(SampleError(retryable: true)))
        XCTAssertEqual(adapterDecision, .doNotRetry)

        var onlyGet = policy
        onlyGet.retryableHTTPMethods = ["GET"]
        let postDecision = await onlyGet.retry(
            post, context: AttemptContext(attempt: 1), failure: .response(response(503)))
        XCTAssertEqual(postDecision, .doNotRetry)
        var get = post
        get.method = "get"
        let getDecision = await onlyGet.retry(
            get, context: AttemptContext(attempt: 1), failure: .response(response(503)))
        XCTAssertEqual(getDecision, .retryAfter(.zero))
    }
}
