import NIOCore
import NIOHTTP1
import XCTest

@testable import RetryClient

/// The bytes the pooled transport writes before a request's body, past NIO's encoder: the
/// request line, `Host`, the request's own fields and the body's framing.
final class RequestHeadTests: XCTestCase {
    private static func head(
        _ request: OutboundRequest, host: String = "example.com", port: Int = 80, secure: Bool = false
    ) -> (text: String, head: PooledHTTPTransport.RequestHead) {
        let head = PooledHTTPTransport.requestHead(of: request, host: host, port: port, secure: secure)
        return (String(decoding: head.bytes.readableBytesView, as: UTF8.self), head)
    }

    func testAPostIsWrittenWithHostItsFieldsAndTheBodysLength() {
        let request = OutboundRequest(
            method: "post", url: "http://example.com/hook?x=1#frag",
            headers: ["Content-Type": "application/json", "X-Two": "a\tb"], body: Array("{}".utf8))
        let (text, head) = Self.head(request)
        XCTAssertEqual(
            text,
            "POST /hook?x=1 HTTP/1.1\r\nHost: example.com\r\nContent-Type: application/json\r\n"
                + "X-Two: a\tb\r\nContent-Length: 2\r\n\r\n")
        XCTAssertEqual(head.method, .POST)
        XCTAssertTrue(head.keepAlive)
    }

    func testFramingFieldsOfTheRequestGiveWayToTheBodysLength() {
        let request = OutboundRequest(
            method: "PUT", url: "http://example.com/",
            headers: ["content-length": "999", "Transfer-Encoding": "chunked", "X-A": "1"])
        XCTAssertEqual(Self.head(request).text, "PUT / HTTP/1.1\r\nHost: example.com\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n")
        let get = OutboundRequest(method: "GET", url: "http://example.com", headers: ["Content-Length": "5"])
        XCTAssertEqual(Self.head(get).text, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
    }

    func testHostCarriesAPortOtherThanTheSchemesAndBracketsAnIPv6Address() {
        let get = { (url: String) in OutboundRequest(method: "GET", url: url) }
        XCTAssertEqual(
            Self.head(get("http://example.com:8080/a"), port: 8080).text,
            "GET /a HTTP/1.1\r\nHost: example.com:8080\r\n\r\n")
        XCTAssertEqual(
            Self.head(get("https://example.com/a"), port: 443, secure: true).text,
            "GET /a HTTP/1.1\r\nHost: example.com\r\n\r\n")
        XCTAssertEqual(
            Self.head(get("https://example.com:80/a"), port: 80, secure: true).text,
            "GET /a HTTP/1.1\r\nHost: example.com:80\r\n\r\n")
        XCTAssertEqual(
            Self.head(get("http://[::1]:9000/v6"), host: "::1", port: 9000).text,
            "GET /v6 HTTP/1.1\r\nHost: [::1]:9000\r\n\r\n")
    }

    func testAHostFieldOfTheRequestIsKeptInsteadOfTheURLs() {
        let request = OutboundRequest(method: "GET", url: "http://10.0.0.1/a", headers: ["host": "api.example.com"])
        XCTAssertEqual(Self.head(request, host: "10.0.0.1").text, "GET /a HTTP/1.1\r\nhost: api.example.com\r\n\r\n")
    }

    func testConnectionCloseInAnyCaseOrListPlaceEndsKeepAlive() {
        for value in ["close", "Close", "keep-alive, CLOSE", " close ,x", "upgrade,\tclose"] {
            let request = OutboundRequest(method: "GET", url: "http://example.com/", headers: ["Connection": value])
            XCTAssertFalse(Self.head(request).head.keepAlive, value)
        }
        for value in ["keep-alive", "closed", "x-close", ""] {
            let request = OutboundRequest(method: "GET", url: "http://example.com/", headers: ["Connection": value])
            XCTAssertTrue(Self.head(request).head.keepAlive, value)
        }
    }

    func testAHeadRequestIsKnownAsOneForItsAnswer() {
        let head = Self.head(OutboundRequest(method: "head", url: "http://example.com/x")).head
        XCTAssertEqual(head.method, .HEAD)
    }
}
