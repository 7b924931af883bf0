import CourierModel
import Foundation
import XCTest

/// `DeliveryPolicy`, the one table of what each outcome means (the two tiers that use it are
/// checked against it in CourierWorkerUnitTests' DeliveryTiersTests).
final class DeliveryPolicyTests: XCTestCase {
    private typealias Outcome = DeliveryPolicy.Outcome

    /// Written out independently of the table: every row of `DeliveryPolicy.table` must be hit.
    private let expectations: [(Outcome, Verdict)] = [
        (.response(status: 200), Verdict(.succeed, .answered)),
        (.response(status: 204), Verdict(.succeed, .answered)),
        (.response(status: 299, retryAfter: true), Verdict(.succeed, .answered)),
        (.response(status: 401, oauth: true), Verdict(.retryNow, .answered, exhausted: .dead)),
        (.response(status: 401), Verdict(.dead, .answered)),
        (.response(status: 408), Verdict(.retryLater, .endpointFailed)),
        (.response(status: 410), Verdict(.park, .gone)),
        (.response(status: 410, retryAfter: true), Verdict(.park, .gone)),
        (.response(status: 425), Verdict(.retryLater, .answered)),
        (.response(status: 429, retryAfter: true), Verdict(.postpone, .none)),
        (.response(status: 429), Verdict(.retryLater, .none)),
        (.response(status: 503, retryAfter: true), Verdict(.postpone, .endpointFailed)),
        (.response(status: 503), Verdict(.retryLater, .endpointFailed)),
        (.response(status: 500), Verdict(.retryLater, .endpointFailed)),
        (.response(status: 502, retryAfter: true), Verdict(.retryLater, .endpointFailed)),
        (.response(status: 504), Verdict(.retryLater, .endpointFailed)),
        (.response(status: 599), Verdict(.retryLater, .endpointFailed)),
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
        (.transport(.readTimeout), Verdict(.retryLater, .endpointFailed)),
        (.transport(.dnsFailure), Verdict(.retryLater, .failed)),
        (.transport(.notConnected), Verdict(.retryLater, .failed)),
        (.transport(.invalidResponse), Verdict(.retryLater, .endpointFailed)),
        (.transport(.bodyTooLarge), Verdict(.retryLater, .endpointFailed)),
        (.transport(.other), Verdict(.retryLater, .failed)),
        (.transport(.tlsFailure), Verdict(.dead, .none)),
        (.transport(.invalidRequest), Verdict(.dead, .none)),
        (.refusedTarget, Verdict(.dead, .none)),
        (.invalidRequest, Verdict(.dead, .none)),
        (.tokenRejected, Verdict(.dead, .none)),
        (.tokenUnavailable, Verdict(.retryLater, .none)),
        (.secretUnavailable, Verdict(.retryLater, .none)),
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
}
