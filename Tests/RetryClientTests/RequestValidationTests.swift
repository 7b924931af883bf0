import RetryClient
import XCTest

/// The pure checks a request passes before it is written to the wire.
final class RequestValidationTests: XCTestCase {
    func testMethodsMustBeTokens() {
        let cases: [(String, Bool)] = [
            ("GET", true), ("POST", true), ("patch", true), ("M-SEARCH", true), ("X!#$%&'*+.^_`|~9", true),
            ("", false), ("GET ", false), (" GET", false), ("GE T", false),
            ("GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST /EVIL", false), ("GET\r\n", false), ("GET\n", false),
            ("GET\0", false), ("GET\t", false), ("GÉT", false), ("GET(", false), ("GET:", false),
            ("GET/", false), ("GET\"", false), ("GET\u{7F}", false),
            (String(repeating: "A", count: 32), true), (String(repeating: "A", count: 33), false),
        ]
        for (method, valid) in cases {
            let error = Self.error { try RequestValidation.validate(method: method) }
            XCTAssertEqual(error == nil, valid, "\(method.debugDescription): \(String(describing: error))")
            if let error { XCTAssertEqual(error.field, .method) }
        }
    }

    func testURLsNeedHTTPSchemeHostAndPortInRange() throws {
        let cases: [(String, (String, String, Int)?)] = [
            ("http://example.com/hook", ("http", "example.com", 80)),
            ("https://example.com", ("https", "example.com", 443)),
            ("HTTPS://Example.COM:8443/x?y=1#z", ("https", "Example.COM", 8443)),
            ("http://example.com:1/", ("http", "example.com", 1)),
            ("http://example.com:65535/", ("http", "example.com", 65_535)),
            ("http://127.0.0.1:8080/a", ("http", "127.0.0.1", 8080)),
            ("http://[::1]:8080/a", ("http", "::1", 8080)),
            ("http://[2001:db8::1]/", ("http", "2001:db8::1", 80)),
            ("http://user:secret@example.com:8080/x", ("http", "example.com", 8080)),
            ("https://example.com?q=1", ("https", "example.com", 443)),
            ("http://example.com#frag", ("http", "example.com", 80)),
            ("http://[::1]:/", nil),
            ("http://[]/", nil),
            ("http://example.com:00080/", ("http", "example.com", 80)),
            ("http://example.com:000080/", nil),
            ("http:/example.com/", nil),
            ("http:", nil),
            ("://example.com/", nil),
            ("http://example.com:0/", nil),
            ("http://example.com:65536/", nil),
            ("http://example.com:99999/", nil),
            ("http://example.com:123456/", nil),
            ("http://example.com:99999999999999999999999/", nil),
            ("http://example.com:-1/", nil),
            ("http://example.com:+80/", nil),
            ("http://example.com:8o/", nil),
            ("http://example.com:/", nil),
            ("http://example.com:80:81/", nil),
            ("http://[::1/", nil),
            ("http://[zz::1]/", nil),
            ("http://[::1]x/", nil),
            ("http:///path", nil),
            ("http://:80/", nil),
            ("ftp://example.com/", nil),
            ("file:///etc/passwd", nil),
            ("example.com/hook", nil),
            ("http://exa mple.com/", nil),
            ("http://example.com/a b", nil),
            ("http://example.com/\r\nX-Evil: 1", nil),
            ("http://example.com/\t", nil),
            ("http://example.com/\0", nil),
            ("http://example.com/\u{7F}", nil),
            ("http://exämple.com/", nil),
            ("http://example.com/" + String(repeating: "a", count: 16_384), nil),
        ]
        for (url, expected) in cases {
            do {
                let target = try RequestValidation.target(ofURL: url)
                if let expected {
                    XCTAssertEqual(target.scheme, expected.0, url)
                    XCTAssertEqual(target.host, expected.1, url)
                    XCTAssertEqual(target.port, expected.2, url)
                } else {
                    XCTFail("accepted \(url.debugDescription) as \(target)")
                }
            } catch let error as RequestValidationError {
                XCTAssertNil(expected, "refused \(url.debugDescription): \(error)")
                XCTAssertEqual(error.field, .url)
                XCTAssertFalse(error.message.contains("\r") || error.message.contains("\n"), error.message)
            }
        }
    }

    func testHeaderNamesAreTokensAndValuesHaveNoControlCharacters() {
        let cases: [((String, String), Bool)] = [
            (("X-Tenant", "acme"), true),
            (("x_odd.name~1", "a b\tc"), true),
            (("X-Obs", "caf\u{E9} \u{1F600}"), true),  // obs-text: bytes 0x80-0xFF
            (("X-Empty", ""), true),
            (("X-Ünï", "v"), false),
            (("", "v"), false),
            (("X Space", "v"), false),
            (("X-Colon:", "v"), false),
            (("X-CRLF\r\n", "v"), false),
            (("X-A", "v\r\nX-Injected: 1"), false),
            (("X-A", "v\rx"), false),
            (("X-A", "v\nx"), false),
            (("X-A", "v\0x"), false),
            (("X-A", "v\u{01}x"), false),
            (("X-A", "v\u{1F}x"), false),
            (("X-A", "v\u{7F}x"), false),
        ]
        for ((name, value), valid) in cases {
            let error = Self.error { try RequestValidation.validate(headers: HeaderFields([(name, value)])) }
            let label = "\(name.debugDescription): \(value.debugDescription)"
            XCTAssertEqual(error == nil, valid, "\(label): \(String(describing: error))")
            if let error {
                XCTAssertEqual(error.field, .headers)
                XCTAssertFalse(error.description.contains("\r") || error.description.contains("\n"))
            }
        }
    }

    func testHeaderCountAndSizeAreBounded() {
        var limits = RequestLimits()
        limits.maximumHeaderCount = 3
        limits.maximumHeaderBytes = 20
        let three = HeaderFields([("a", "1"), ("b", "2"), ("c", "3")])
        XCTAssertNil(Self.error { try RequestValidation.validate(headers: three, limits: limits) })
        var four = three
        four.add("d", "4")
        XCTAssertNotNil(Self.error { try RequestValidation.validate(headers: four, limits: limits) })
        let big = HeaderFields([("a", String(repeating: "x", count: 19))])
        XCTAssertNil(Self.error { try RequestValidation.validate(headers: big, limits: limits) })
        let tooBig = HeaderFields([("ab", String(repeating: "x", count: 19))])
        XCTAssertNotNil(Self.error { try RequestValidation.validate(headers: tooBig, limits: limits) })
        let defaults = RequestLimits()
        XCTAssertEqual(defaults.maximumHeaderCount, 128)
        XCTAssertEqual(defaults.maximumHeaderBytes, 1 << 20)
    }

    func testConnectAddressMustBeALiteral() {
        for (address, valid) in [("127.0.0.1", true), ("::1", true), ("2001:db8::1", true),
                                 ("localhost", false), ("[::1]", false), ("127.0.0.1:80", false), ("", false)] {
            let request = OutboundRequest(url: "http://example.com/", connectAddress: address)
            let error = Self.error { try request.validate() }
            XCTAssertEqual(error == nil, valid, "\(address): \(String(describing: error))")
            if let error { XCTAssertEqual(error.field, .connectAddress) }
        }
    }

    func testWholeRequestNamesTheFirstBadPart() {
        let good = OutboundRequest(method: "POST", url: "https://example.com/h", headers: ["X-A": "1"], body: [1])
        XCTAssertNil(Self.error { try good.validate() })
        var bad = good
        bad.method = "POST\r\n"
        XCTAssertEqual(Self.error { try bad.validate() }?.field, .method)
        bad = good
        bad.url = "https://example.com:70000/h"
        XCTAssertEqual(Self.error { try bad.validate() }?.field, .url)
        bad = good
        bad.headers.add("X-B", "1\r\n2")
        XCTAssertEqual(Self.error { try bad.validate() }?.field, .headers)
    }

    /// A request validated once remembers its URL's parts; a later validation reuses them only
    /// for the same URL within the same length limit, and checks everything else again.
    func testARememberedURLIsReusedOnlyWhileItIsTheSame() throws {
        var request = OutboundRequest(url: "https://Example.com:8443/h", headers: ["X-A": "1"])
        let first = try request.validateRemembering()
        XCTAssertEqual(first.host, "Example.com")
        XCTAssertEqual(first.port, 8443)
        let again = try request.validate()
        XCTAssertEqual(again.scheme, "https")
        XCTAssertEqual(again.host, "Example.com")
        XCTAssertEqual(again.port, 8443)
        XCTAssertEqual(request, OutboundRequest(url: "https://Example.com:8443/h", headers: ["X-A": "1"]))
        // A changed URL is taken apart again: a bad one is refused, a good one answers for itself.
        var changed = request
        changed.url = "https://example.com:70000/h"
        XCTAssertEqual(Self.error { try changed.validate() }?.field, .url)
        changed.url = "http://other.example/h"
        XCTAssertEqual(try changed.validate().host, "other.example")
        XCTAssertEqual(try changed.validate().port, 80)
        // A transport with a shorter URL limit still enforces it.
        var limits = RequestLimits()
        limits.maximumURLBytes = 10
        XCTAssertEqual(Self.error { try request.validate(limits: limits) }?.field, .url)
        // Headers and method are checked every time.
        var headers = request
        headers.headers.add("X-B", "1\r\n2")
        XCTAssertEqual(Self.error { try headers.validate() }?.field, .headers)
        var method = request
        method.method = "GET /"
        XCTAssertEqual(Self.error { try method.validate() }?.field, .method)
    }

    private static func error(_ body: () throws -> Void) -> RequestValidationError? {
        do {
            try body()
            return nil
        } catch let error as RequestValidationError {
            return error
        } catch {
            XCTFail("unexpected \(error)")
            return nil
        }
    }
}
