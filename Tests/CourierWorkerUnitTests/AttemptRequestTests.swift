import CourierCore
import Foundation
import Logging
import RetryClient
import XCTest

@testable import CourierWorker

/// The request `HTTPDeliverer` makes of a claimed job: the job's fields in their order, the
/// worker's own after them, and which of the job's fields the worker's replace or keep.
final class AttemptRequestTests: XCTestCase {
    private func deliverer() -> HTTPDeliverer {
        var configuration = HTTPDelivererConfiguration()
        configuration.userAgent = "courier-test/1"
        return HTTPDeliverer(configuration: configuration, logger: Logger(label: "test"))
    }

    private func job(_ headers: [(String, String)]) -> ClaimedJob {
        ClaimedJob(
            id: 41, queue: "q", method: "POST", url: "http://127.0.0.1:9/hook", headers: headers,
            body: Array("{}".utf8), attempt: 3, maxAttempts: 5, schedule: .standardWebhooks, signingSecret: nil,
            queueMaxInFlight: nil)
    }

    private func names(_ request: OutboundRequest) -> [String] { request.headers.map(\.name) }

    func testTheWorkersFieldsFollowTheJobsInAFixedOrder() throws {
        let deliverer = deliverer()
        defer { deliverer.shutdown() }
        let request = deliverer.makeRequest(
            job([("Content-Type", "application/json"), ("X-Tenant", "7")]), traceparent: "00-trace-span-01")
        XCTAssertEqual(
            names(request),
            ["Content-Type", "X-Tenant", "User-Agent", "traceparent", "courier-job-id", "courier-attempt",
             "webhook-id", "webhook-timestamp"])
        XCTAssertEqual(request.headers["user-agent"], "courier-test/1")
        XCTAssertEqual(request.headers["traceparent"], "00-trace-span-01")
        XCTAssertEqual(request.headers["courier-job-id"], "41")
        XCTAssertEqual(request.headers["courier-attempt"], "3")
        XCTAssertEqual(request.headers["webhook-id"], "job_41")
        let timestamp = try XCTUnwrap(request.headers["webhook-timestamp"].flatMap { Int64($0) })
        XCTAssertLessThan(abs(Double(timestamp) - Date().timeIntervalSince1970), 60)
        XCTAssertEqual(request.method, "POST")
        XCTAssertEqual(request.url, "http://127.0.0.1:9/hook")
        XCTAssertEqual(request.body, Array("{}".utf8))
        // No traceparent to give: none is added.
        XCTAssertFalse(names(deliverer.makeRequest(job([]), traceparent: nil)).contains("traceparent"))
    }

    func testTheJobKeepsItsAgentTraceAndIDButNeverItsJobFields() {
        let deliverer = deliverer()
        defer { deliverer.shutdown() }
        let request = deliverer.makeRequest(
            job([
                ("courier-job-id", "9"), ("USER-AGENT", "producer/2"), ("Courier-Attempt", "99"),
                ("TraceParent", "00-producer-01"), ("Webhook-Id", "msg_5"), ("webhook-timestamp", "1"),
                ("X-Last", "z"), ("courier-job-id", "10"),
            ]),
            traceparent: "00-worker-01")
        XCTAssertEqual(
            request.headers.map { "\($0.name)=\($0.value)" },
            ["USER-AGENT=producer/2", "TraceParent=00-producer-01", "Webhook-Id=msg_5", "X-Last=z",
             "courier-job-id=41", "courier-attempt=3", "webhook-timestamp=\(request.headers["webhook-timestamp"] ?? "")"])
        XCTAssertNotEqual(request.headers["webhook-timestamp"], "1")
    }
}
