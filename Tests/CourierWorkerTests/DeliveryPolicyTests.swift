import CourierCore
@testable import CourierWorker
import Foundation
import RetryClient
import XCTest

/// `DeliveryPolicy`, the one table of what each outcome means, and the two tiers that use it.
final class DeliveryPolicyTests: XCTestCase {
    private typealias Outcome = DeliveryPolicy.Outcome

    /// Written out independently of the table: every row of `DeliveryPolicy.table` must be hit.
    private let expectations: [(Outcome, Verdict)] = [
        (.response(status: 200), Verdict(.succeed, .answered)),
        (.response(status: 204), Verdict(.succeed, .answered)),
        (.response(status: 299, retryAfter: true), Verdict(.succeed, .answered)),
        (.response(status: 401, oauth: true), Verdict(.retryNow, .answered, exhausted: .dead)),
        (.response(status: 401), Verdict(.dead, .answered)),
        (.response(status: 408), Verdict(.retryLater, .failed)),
        (.response(status: 410), Verdict(.park, .gone)),
        (.response(status: 410, retryAfter: true), Verdict(.park, .gone)),
        (.response(status: 425), Verdict(.retryLater, .answered)),
        (.response(status: 429, retryAfter: true), Verdict(.postpone, .none)),
        (.response(status: 429), Verdict(.retryLater, .none)),
        (.response(status: 503, retryAfter: true), Verdict(.postpone, .failed)),
        (.response(status: 503), Verdict(.retryLater, .failed)),
        (.response(status: 500), Verdict(.retryLater, .failed)),
        (.response(status: 502, retryAfter: true), Verdict(.retryLater, .failed)),
        (.response(status: 504), Verdict(.retryLater, .failed)),
        (.response(status: 599), Verdict(.retryLater, .failed)),
        (.response(status: 501), Verdict(.dead, .answered)),
        (.response(status: 505), Verdict(.dead, .answered)),
        (.response(status: 301), Verdict(.dead, .answered)),
        (.response(status: 304), Verdict(.dead, .answered)),
        (.response(status: 400), Verdict(.dead, .answered)),
        (.response(status: 403, oauth: true), Verdict(.dead, .answered)),
        (.response(status: 404), Verdict(.dead, .answered)),
        (.response(status: 422), Verdict(.dead, .answered)),
        (.response(status: 100), Verdict(.dead, .answered)),
        (.response(status: 600), Verdict(.dead, .answered)),
        (.transport(.connectRefused), Verdict(.retryNow, .failed, exhausted: .retryLater)),
        (.transport(.connectionReset), Verdict(.retryNow, .failed, exhausted: .retryLater)),
        (.transport(.connectTimeout), Verdict(.retryLater, .failed)),
        (.transport(.readTimeout), Verdict(.retryLater, .failed)),
        (.transport(.dnsFailure), Verdict(.retryLater, .failed)),
        (.transport(.notConnected), Verdict(.retryLater, .failed)),
        (.transport(.invalidResponse), Verdict(.retryLater, .failed)),
        (.transport(.bodyTooLarge), Verdict(.retryLater, .failed)),
        (.transport(.other), Verdict(.retryLater, .failed)),
        (.transport(.tlsFailure), Verdict(.dead, .none)),
        (.transport(.invalidRequest), Verdict(.dead, .none)),
        (.refusedTarget, Verdict(.dead, .none)),
        (.invalidRequest, Verdict(.dead, .none)),
        (.tokenRejected, Verdict(.dead, .none)),
        (.tokenUnavailable, Verdict(.retryLater, .none)),
        (.interrupted, Verdict(.retryLater, .none)),
    ]

    func testEveryRowOfTheTable() {
        var hit = Set<Int>()
        for (outcome, expected) in expectations {
            XCTAssertEqual(DeliveryPolicy.verdict(for: outcome), expected, "\(outcome)")
            if let row = DeliveryPolicy.row(for: outcome), let index = DeliveryPolicy.table.firstIndex(of: row) {
                hit.insert(index)
            }
        }
        let missed = DeliveryPolicy.table.indices.filter { !hit.contains($0) }.map { DeliveryPolicy.table[$0].why }
        XCTAssertEqual(missed, [], "rows without a test case")
        // Every transport kind this version knows has a case.
        for kind in TransportError.Kind.allCases {
            XCTAssertTrue(expectations.contains { $0.0 == .transport(kind) }, "\(kind) has no case")
        }
    }

    /// The durable tier's transition for a verdict's durable action.
    private func expectedTransition(_ action: DeliveryPolicy.Action) -> String {
        switch action {
        case .succeed: return "succeed"
        case .retryNow, .retryLater: return "retry"
        case .postpone: return "postpone"
        case .park: return "park"
        case .dead: return "dead"
        }
    }

    private func name(_ transition: JobTransition) -> String {
        switch transition {
        case .succeed: return "succeed"
        case .retry: return "retry"
        case .postpone: return "postpone"
        case .park: return "park"
        case .dead: return "dead"
        }
    }

    func testBothTiersFollowTheTableForEveryStatusAndTransportKind() {
        let configuration = HTTPDelivererConfiguration()
        let quick = HTTPDeliverer.quickRetryPolicy(configuration)
        let library = RetryPolicy()
        let schedule = RetrySchedule(delays: [.seconds(5)])
        func durable(_ result: Delivery) -> JobTransition {
            JobTransition.decide(result, attempt: 1, maxAttempts: 5, schedule: schedule, random: 0.5)
        }
        for status in 100...599 {
            for retryAfter in [false, true] {
                let verdict = DeliveryPolicy.verdict(status: status, retryAfter: retryAfter)
                let response = HTTPResponseSummary(status: status, headers: retryAfter ? ["Retry-After": "7"] : [:])
                let label = "\(status)\(retryAfter ? " with Retry-After" : "")"
                XCTAssertEqual(quick.isRetryable(.response(response)), verdict.action == .retryNow, "in process: \(label)")
                XCTAssertEqual(
                    library.isRetryable(.response(response)), DeliveryPolicy.retries(verdict.action), "RetryPolicy: \(label)")
                let result = HTTPDeliverer.classify(response)
                XCTAssertEqual(name(durable(result)), expectedTransition(verdict.durable), "durable: \(label)")
                XCTAssertEqual(result.verdict, verdict, "the delivery carries the table's verdict: \(label)")
            }
        }
        for kind in TransportError.Kind.allCases {
            let verdict = DeliveryPolicy.verdict(for: .transport(kind))
            let error = TransportError(kind: kind, message: "x")
            XCTAssertEqual(quick.isRetryable(.transport(error)), verdict.action == .retryNow, "in process: \(kind)")
            XCTAssertEqual(library.isRetryable(.transport(error)), DeliveryPolicy.retries(verdict.action), "RetryPolicy: \(kind)")
            let result = HTTPDeliverer.classify(error, configuration: configuration)
            XCTAssertEqual(name(durable(result)), expectedTransition(verdict.durable), "durable: \(kind)")
            XCTAssertEqual(result.verdict, verdict, "the delivery carries the table's verdict: \(kind)")
        }
    }

    func testTheHostSettingAndThePostponementLimitStayWithTheJob() {
        let gone = HTTPDeliverer.classify(HTTPResponseSummary(status: 410))
        let schedule = RetrySchedule(delays: [.seconds(5)])
        XCTAssertEqual(
            name(JobTransition.decide(gone, attempt: 1, maxAttempts: 3, schedule: schedule, parkOnGone: false, random: 0.5)),
            "dead", "a shared host's 410 ends only the job")
        let limited = HTTPDeliverer.classify(HTTPResponseSummary(status: 429, headers: ["Retry-After": "3"]))
        XCTAssertEqual(
            name(JobTransition.decide(
                limited, attempt: 1, maxAttempts: 3, schedule: schedule,
                postponements: Defaults.maximumPostponements, random: 0.5)),
            "retry", "after the postponement limit a 429 spends attempts")
    }
}
