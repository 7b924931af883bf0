import CourierWorker
import XCTest

/// Which addresses count as global, every special-purpose range and embedded-IPv4 form included.
final class TargetPolicyTests: XCTestCase {
    func testIPv4SpecialPurposeRangesAreNotGlobal() {
        let cases: [(String, Bool)] = [
            ("93.184.216.34", true), ("8.8.8.8", true), ("1.1.1.1", true), ("223.255.255.255", true),
            ("0.0.0.0", false), ("0.255.255.255", false),  // "this network" 0/8
            ("10.0.0.1", false), ("10.255.255.255", false),
            ("100.63.255.255", true), ("100.64.0.1", false), ("100.127.255.255", false), ("100.128.0.0", true),
            ("127.0.0.1", false), ("127.255.255.254", false),
            ("169.254.169.254", false),  // link-local, cloud metadata
            ("172.15.255.255", true), ("172.16.0.1", false), ("172.31.255.255", false), ("172.32.0.0", true),
            ("192.0.0.8", false), ("192.0.0.170", false),  // IETF protocol assignments 192.0.0.0/24
            ("192.0.2.1", false),  // TEST-NET-1
            ("192.88.99.1", false),  // deprecated 6to4 relay
            ("192.168.1.1", false),
            ("198.17.255.255", true), ("198.18.0.1", false), ("198.19.255.255", false), ("198.20.0.0", true),
            ("198.51.100.7", false), ("203.0.113.9", false),  // TEST-NET-2, TEST-NET-3
            ("224.0.0.1", false), ("239.255.255.255", false),  // multicast
            ("240.0.0.1", false), ("255.255.255.254", false), ("255.255.255.255", false),  // reserved, broadcast
        ]
        for (text, global) in cases {
            guard let address = IPAddress(text) else { return XCTFail("\(text) did not parse") }
            XCTAssertFalse(address.isIPv6)
            XCTAssertEqual(address.isGlobal, global, text)
        }
    }

    func testIPv6RangesAndEmbeddedIPv4FormsAreJudgedByTheirInnerAddress() {
        let cases: [(String, Bool, String)] = [
            ("2606:2800:220:1:248:1893:25c8:1946", true, "global unicast"),
            ("2a00:1450:4001:82a::200e", true, "global unicast"),
            ("::", false, "unspecified"),
            ("::1", false, "loopback"),
            ("::ffff:93.184.216.34", true, "v4-mapped global"),
            ("::ffff:127.0.0.1", false, "v4-mapped loopback"),
            ("::ffff:10.1.2.3", false, "v4-mapped private"),
            ("::ffff:169.254.169.254", false, "v4-mapped link-local"),
            ("::93.184.216.34", true, "v4-compatible global"),
            ("::127.0.0.1", false, "v4-compatible loopback"),
            ("::192.168.0.1", false, "v4-compatible private"),
            ("::10.0.0.1", false, "v4-compatible private"),
            ("::ffff:0:93.184.216.34", false, "IPv4-translated ::ffff:0:0:0/96 is not routed"),
            ("2002:5db8:d822::1", true, "6to4 of 93.184.216.34"),
            ("2002:7f00:1::1", false, "6to4 of 127.0.0.1"),
            ("2002:c0a8:101::", false, "6to4 of 192.168.1.1"),
            ("2002:a00:1::1", false, "6to4 of 10.0.0.1"),
            ("2002:a9fe:a9fe::", false, "6to4 of 169.254.169.254"),
            ("64:ff9b::93.184.216.34", true, "NAT64 well-known prefix, global inner"),
            ("64:ff9b::7f00:1", false, "NAT64 well-known prefix of 127.0.0.1"),
            ("64:ff9b::10.0.0.1", false, "NAT64 well-known prefix of 10.0.0.1"),
            ("64:ff9b:1::5db8:d822", false, "local-use NAT64 64:ff9b:1::/48"),
            ("64:ff9b:1:ffff::1", false, "local-use NAT64"),
            ("2001:0:5db8:d822::a247:27dd", true, "Teredo: server 93.184.216.34, client 93.184.216.34 (xor)"),
            ("2001:0:5db8:d822::80ff:fffe", false, "Teredo client 127.0.0.1 (xor 0xff)"),
            ("2001:0:5db8:d822::f5ff:fffe", false, "Teredo client 10.0.0.1 (xor 0xff)"),
            ("2001:0:7f00:1::a247:27dd", false, "Teredo server 127.0.0.1"),
            ("2001:0:c0a8:101::a247:27dd", false, "Teredo server 192.168.1.1"),
            ("2001:1::1", true, "PCP anycast"),
            ("2001:1::2", true, "TURN anycast"),
            ("2001:1::4", false, "unassigned in 2001:1::/32"),
            ("2001:2::1", false, "benchmarking 2001:2::/48"),
            ("2001:3::1", true, "AMT"),
            ("2001:4:112::1", true, "AS112-v6"),
            ("2001:4:113::1", false, "IETF protocol assignment"),
            ("2001:10::1", false, "ORCHID (deprecated) 2001:10::/28"),
            ("2001:1f::1", false, "ORCHID (deprecated) 2001:10::/28"),
            ("2001:20::1", true, "ORCHIDv2"),
            ("2001:100::1", false, "unassigned in 2001::/23"),
            ("2001:1ff::1", false, "unassigned in 2001::/23"),
            ("2001:200::1", true, "global unicast just after 2001::/23"),
            ("2001:db8::1", false, "documentation"),
            ("2001:db8:ffff::1", false, "documentation"),
            ("3fff::1", false, "documentation 3fff::/20"),
            ("3fff:fff::1", false, "documentation 3fff::/20"),
            ("3fff:1000::1", true, "global unicast after 3fff::/20"),
            ("5f00::1", false, "SRv6 SIDs 5f00::/16"),
            ("100::1", false, "discard-only 100::/64"),
            ("100:0:0:1::1", false, "dummy prefix"),
            ("fc00::1", false, "unique local"),
            ("fd12:3456:789a::1", false, "unique local"),
            ("fe80::1", false, "link-local"),
            ("febf::1", false, "link-local"),
            ("fec0::1", false, "site-local (deprecated)"),
            ("feff::1", false, "site-local (deprecated)"),
            ("ff02::1", false, "multicast"),
            ("ff0e::1", false, "multicast"),
            ("4000::1", false, "unassigned outside 2000::/3"),
            ("1::1", false, "unassigned outside 2000::/3"),
        ]
        for (text, global, why) in cases {
            guard let address = IPAddress(text) else { return XCTFail("\(text) did not parse") }
            XCTAssertTrue(address.isIPv6)
            XCTAssertEqual(address.isGlobal, global, "\(text): \(why)")
        }
    }

    func testTeredoClientAddressIsInverted() throws {
        // RFC 4380's example layout: client 192.0.2.45 obfuscated as 3fff:fdd2 — a
        // documentation address inside, so not global even though the server is.
        let address = try XCTUnwrap(IPAddress("2001:0:5db8:d822:8000:f227:3fff:fdd2"))
        XCTAssertFalse(address.isGlobal)
    }

    func testLiteralsParseWithAndWithoutBracketsAndPrintCanonically() {
        XCTAssertEqual(IPAddress("[::1]")?.description, "::1")
        XCTAssertEqual(IPAddress("2001:DB8:0:0::1")?.description, "2001:db8::1")
        XCTAssertEqual(IPAddress("127.0.0.1")?.description, "127.0.0.1")
        XCTAssertEqual(IPAddress("127.0.0.1")?.bytes, [127, 0, 0, 1])
        for bad in ["", "localhost", "1.2.3", "1.2.3.4.5", "256.1.1.1", "::g", "[::1", "01.2.3.4", "1.2.3.4:80"] {
            XCTAssertNil(IPAddress(bad), bad)
        }
        XCTAssertNil(IPAddress(bytes: [1, 2, 3]))
    }

    func testFirstNonGlobalFindsAnyBadAnswer() {
        let global = IPAddress("93.184.216.34")!
        let loopback = IPAddress("127.0.0.1")!
        XCTAssertNil(TargetPolicy.firstNonGlobal([global]))
        XCTAssertEqual(TargetPolicy.firstNonGlobal([global, loopback]), loopback)
        XCTAssertEqual(TargetPolicy.firstNonGlobal([loopback, global]), loopback)
    }

    func testSystemResolverResolvesLocalhostToLoopback() async throws {
        let addresses = try await SystemResolver().resolve("localhost")
        XCTAssertFalse(addresses.isEmpty)
        XCTAssertTrue(addresses.allSatisfy { !$0.isGlobal })
        XCTAssertEqual(try TargetPolicy.firstNonGlobalAddress(of: "localhost").flatMap(IPAddress.init)?.isGlobal, false)
    }
}
