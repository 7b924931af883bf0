import CourierCore
import Foundation
import RetryClient
import XCTest

@testable import CourierWorker

/// The two tiers that use `DeliveryPolicy`'s table: the in-process retry of `HTTPDeliverer`
/// and `RetryPolicy`, and the durable transition of the outcome it classifies.
final class DeliveryTiersTests: XCTestCase {
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
