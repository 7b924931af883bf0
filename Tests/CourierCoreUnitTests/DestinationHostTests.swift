import CourierCore
import XCTest

/// `DestinationHost.normalize`: the key of a destination's row is the URL's host, lowercased,
/// and anything that is not a host name gives none.
final class DestinationHostTests: XCTestCase {
    func testDestinationHostNames() {
        XCTAssertEqual(DestinationHost.normalize("Hooks.Example.COM"), "hooks.example.com")
        XCTAssertEqual(DestinationHost.normalize("https://Hooks.example.com:8443/x?y=1"), "hooks.example.com")
        XCTAssertEqual(DestinationHost.normalize("http://[::1]:80/x"), "[::1]")
        XCTAssertEqual(DestinationHost.normalize("[2001:db8::1]"), "[2001:db8::1]")
        XCTAssertNil(DestinationHost.normalize(""))
        XCTAssertNil(DestinationHost.normalize("a b"))
        XCTAssertNil(DestinationHost.normalize("evil.com/../x"))
        XCTAssertNil(DestinationHost.normalize(String(repeating: "a", count: 300)))
    }
}
