import XCTest

@testable import RetryClient

/// The memo of URL targets answers exactly as taking the URL apart does, keeps only URLs that
/// passed, and stays within its bounds.
final class URLTargetMemoTests: XCTestCase {
    private static let urls = [
        "http://example.com/hook", "HTTPS://Example.COM:8443/x?y=1#z", "http://[::1]:8080/a",
        "http://user:secret@example.com:8080/x", "http://example.com:00080/", "https://example.com?q=1",
        "http://example.com:65536/", "http://[::1/", "ftp://example.com/", "http://exa mple.com/",
        "http://example.com/\r\nX-Evil: 1", "http://:80/", "example.com/hook",
    ]

    func testALookedUpTargetIsTheOneTheParseGives() throws {
        URLTargetMemo.shared.removeAll()
        for round in 1...3 {
            for url in Self.urls {
                let parsed = Result { try RequestValidation.parseTarget(ofURL: url) }
                let answered = Result { try RequestValidation.target(ofURL: url) }
                switch (parsed, answered) {
                case (.success(let expected), .success(let target)):
                    XCTAssertEqual(target.scheme, expected.scheme, url)
                    XCTAssertEqual(target.host, expected.host, url)
                    XCTAssertEqual(target.port, expected.port, url)
                    XCTAssertNotNil(URLTargetMemo.shared.target(of: url), "round \(round): \(url) not remembered")
                case (.failure(let expected), .failure(let error)):
                    XCTAssertEqual(error as? RequestValidationError, expected as? RequestValidationError, url)
                    XCTAssertNil(URLTargetMemo.shared.target(of: url), "round \(round): refused \(url) remembered")
                default:
                    XCTFail("round \(round): \(url.debugDescription) parsed as \(parsed), answered \(answered)")
                }
            }
        }
        // A remembered URL is still held to a shorter length limit.
        var limits = RequestLimits()
        limits.maximumURLBytes = 10
        XCTAssertNotNil(URLTargetMemo.shared.target(of: "http://example.com/hook"))
        XCTAssertThrowsError(try RequestValidation.target(ofURL: "http://example.com/hook", limits: limits)) {
            XCTAssertEqual(($0 as? RequestValidationError)?.field, .url)
        }
    }

    func testTheMemoKeepsTwoGenerationsOfShortURLs() {
        let memo = URLTargetMemo(capacity: 3, maximumURLBytes: 40)
        let kept = "http://kept.example/"
        for index in 0..<20 {
            memo.remember("http://host\(index).example/", ("http", "host\(index).example", 80))
            // A URL in use moves to the newer generation and is never dropped.
            if index == 0 { memo.remember(kept, ("http", "kept.example", 80)) }
            XCTAssertEqual(memo.target(of: kept)?.host, "kept.example", "after \(index + 1) others")
            XCTAssertLessThanOrEqual(memo.count, 6)
        }
        // One not used for two generations is gone; the latest ones are there.
        XCTAssertNil(memo.target(of: "http://host0.example/"))
        XCTAssertEqual(memo.target(of: "http://host19.example/")?.host, "host19.example")
        // A URL longer than the bound is never kept.
        let long = "http://example.com/" + String(repeating: "a", count: 40)
        memo.remember(long, ("http", "example.com", 80))
        XCTAssertNil(memo.target(of: long))
        memo.removeAll()
        XCTAssertEqual(memo.count, 0)
    }
}
