import XCTest

@testable import RetryClient

/// The request target the pooled transport writes: the URL's path and query, never its
/// fragment, `/` when there is no path.
final class RequestTargetTests: XCTestCase {
    func testTheTargetIsThePathAndQueryWithoutTheFragment() {
        let cases: [(String, String)] = [
            ("http://example.com/hook", "/hook"),
            ("http://example.com", "/"),
            ("http://example.com/", "/"),
            ("https://example.com:8443/a/b?x=1&y=2", "/a/b?x=1&y=2"),
            ("http://example.com?x=1", "/?x=1"),
            ("http://example.com#frag", "/"),
            ("http://example.com/a#frag?not=query", "/a"),
            ("http://user:pw@example.com/a", "/a"),
            ("http://[::1]:8080/v6?q", "/v6?q"),
            ("not a url", "/"),
        ]
        for (url, target) in cases {
            let head = PooledHTTPTransport.requestHead(
                of: OutboundRequest(method: "GET", url: url), host: "example.com", port: 80, secure: false)
            let line = String(decoding: head.bytes.readableBytesView, as: UTF8.self)
                .components(separatedBy: "\r\n")[0]
            XCTAssertEqual(line, "GET \(target) HTTP/1.1", url)
        }
    }
}
