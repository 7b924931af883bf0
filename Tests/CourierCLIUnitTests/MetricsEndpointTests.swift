import Foundation
import NIOHTTP1
import XCTest

@testable import CourierMetrics

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The metrics endpoint on its own: what each method and path gets, over a real socket.
final class MetricsEndpointTests: XCTestCase {
    func testOnlyGetAndHeadOfMetricsAreServed() throws {
        XCTAssertEqual(ScrapeAnswer.of(method: .GET, uri: "/metrics"), .metrics(includeBody: true))
        XCTAssertEqual(ScrapeAnswer.of(method: .GET, uri: "/metrics?x=1"), .metrics(includeBody: true))
        XCTAssertEqual(ScrapeAnswer.of(method: .HEAD, uri: "/metrics"), .metrics(includeBody: false))
        XCTAssertEqual(ScrapeAnswer.of(method: .POST, uri: "/metrics"), .methodNotAllowed)
        XCTAssertEqual(ScrapeAnswer.of(method: .GET, uri: "/"), .notFound)
        XCTAssertEqual(ScrapeAnswer.of(method: .GET, uri: "/metrics/x"), .notFound)

        let endpoint = try MetricsEndpoint.start(host: "127.0.0.1", port: 0) { Array("courier_up 1\n".utf8) }
        defer { endpoint.shutdown() }
        let base = "http://127.0.0.1:\(endpoint.port)"
        let scrape = try fetch(base + "/metrics")
        XCTAssertEqual(scrape.status, 200)
        XCTAssertEqual(scrape.body, "courier_up 1\n")
        XCTAssertTrue(scrape.contentType.hasPrefix("text/plain; version=0.0.4"), scrape.contentType)
        XCTAssertEqual(try fetch(base + "/metrics", method: "HEAD").body, "")
        let post = try fetch(base + "/metrics", method: "POST")
        XCTAssertEqual(post.status, 405)
        XCTAssertEqual(try fetch(base + "/other").status, 404)
    }

    private func fetch(_ url: String, method: String = "GET") throws -> (status: Int, body: String, contentType: String) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        let done = DispatchSemaphore(value: 0)
        let box = ResultBox()
        URLSession.shared.dataTask(with: request) { data, response, error in
            let http = response as? HTTPURLResponse
            box.value = (http?.statusCode ?? -1, String(decoding: data ?? Data(), as: UTF8.self),
                         http?.value(forHTTPHeaderField: "Content-Type") ?? "", error)
            done.signal()
        }.resume()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        if let error = box.value?.3 { throw error }
        let value = try XCTUnwrap(box.value)
        return (value.0, value.1, value.2)
    }
}

private final class ResultBox: @unchecked Sendable {
    var value: (Int, String, String, (any Error)?)?
}
