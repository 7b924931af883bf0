#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An IPv4 (4 bytes) or IPv6 (16 bytes) address, as resolved or written in a URL.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address in network order: 4 bytes for IPv4, 16 for IPv6.
    public let bytes: [UInt8]

    /// Creates an address from 4 or 16 bytes; nil for any other length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// Parses a literal (`192.0.2.1`, `2001:db8::1`, `[2001:db8::1]`); nil when it is not one.
    public init?(_ text: String) {
        let literal = text.hasPrefix("[") && text.hasSuffix("]") ? String(text.dropFirst().dropLast()) : text
        var v4 = in_addr()
        var v6 = in6_addr()
        if literal.withCString({ inet_pton(AF_INET, $0, &v4) }) == 1 {
            bytes = withUnsafeBytes(of: v4) { Array($0) }
        } else if literal.withCString({ inet_pton(AF_INET6, $0, &v6) }) == 1 {
            bytes = withUnsafeBytes(of: v6) { Array($0) }
        } else {
            return nil
        }
    }

    /// Whether this is an IPv6 address.
    public var isIPv6: Bool { bytes.count == 16 }

    /// Whether the address is global (public); see ``TargetPolicy``.
    public var isGlobal: Bool {
        isIPv6 ? TargetPolicy.isGlobal(ipv6: bytes) : TargetPolicy.isGlobal(ipv4: bytes)
    }

    /// The usual text form (`inet_ntop`), without brackets.
    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = isIPv6 ? AF_INET6 : AF_INET
        let ok = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil
        }
        guard ok else { return bytes.map(String.init).joined(separator: ".") }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Whether an address is a global (public) one. Deliveries to anything else — private,
/// loopback, link-local, CGNAT, documentation, benchmarking, multicast, reserved, and IPv6
/// forms that wrap such an IPv4 address — are refused unless configuration allows private
/// targets.
///
/// The tables follow the IANA IPv4 and IPv6 Special-Purpose Address Registries. IPv6 forms that
/// carry an IPv4 address (v4-mapped, v4-compatible, 6to4, NAT64, Teredo) are judged by the IPv4
/// address inside, since that is where the packets end up. Outside `2000::/3`, the only IPv6
/// block IANA allocates for global unicast, nothing is global except the NAT64 prefix.
public enum TargetPolicy {
    /// True for a global IPv4 address (4 bytes, network order).
    public static func isGlobal(ipv4 b: [UInt8]) -> Bool {
        guard b.count == 4 else { return false }
        switch (b[0], b[1], b[2]) {
        case (0, _, _): return false  // "this network" 0.0.0.0/8
        case (10, _, _): return false  // private
        case (100, 64...127, _): return false  // shared address space (CGNAT) 100.64.0.0/10
        case (127, _, _): return false  // loopback
        case (169, 254, _): return false  // link-local
        case (172, 16...31, _): return false  // private
        case (192, 0, 0): return false  // IETF protocol assignments 192.0.0.0/24
        case (192, 0, 2): return false  // documentation TEST-NET-1
        case (192, 88, 99): return false  // deprecated 6to4 relay anycast
        case (192, 168, _): return false  // private
        case (198, 18...19, _): return false  // benchmarking 198.18.0.0/15
        case (198, 51, 100): return false  // documentation TEST-NET-2
        case (203, 0, 113): return false  // documentation TEST-NET-3
        case (224...239, _, _): return false  // multicast
        case (240...255, _, _): return false  // reserved 240.0.0.0/4 and broadcast
        default: return true
        }
    }

    /// True for a global IPv6 address (16 bytes).
    public static func isGlobal(ipv6 b: [UInt8]) -> Bool {
        guard b.count == 16 else { return false }
        func zero(_ range: Range<Int>) -> Bool { b[range].allSatisfy { $0 == 0 } }
        func inner(_ start: Int) -> [UInt8] { Array(b[start..<start + 4]) }

        if zero(0..<15) { return false }  // :: unspecified and ::1 loopback
        if zero(0..<10) && b[10] == 0xFF && b[11] == 0xFF { return isGlobal(ipv4: inner(12)) }  // ::ffff:0:0/96
        if zero(0..<12) { return isGlobal(ipv4: inner(12)) }  // v4-compatible ::/96 (deprecated)
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B {
            if zero(4..<12) { return isGlobal(ipv4: inner(12)) }  // NAT64 well-known prefix 64:ff9b::/96
            return false  // 64:ff9b:1::/48 local-use NAT64, and the rest of 64:ff9b::/32
        }
        // Outside 2000::/3 nothing else is global unicast: ::/8 rest (IPv4-translated),
        // 100::/64 discard-only, 5f00::/16 SRv6 SIDs, fc00::/7 unique local, fe80::/10
        // link-local, fec0::/10 site-local, ff00::/8 multicast, and the unassigned rest.
        if b[0] & 0xE0 != 0x20 { return false }
        if b[0] == 0x20 && b[1] == 0x02 { return isGlobal(ipv4: inner(2)) }  // 6to4 2002::/16
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return false }  // documentation
        if b[0] == 0x3F && b[1] == 0xFF && b[2] & 0xF0 == 0x00 { return false }  // documentation 3fff::/20
        if b[0] == 0x20 && b[1] == 0x01 && b[2] & 0xFE == 0x00 { return isGlobal(ietfProtocolAssignment: b) }
        return true
    }

    /// `2001::/23`, IETF protocol assignments: not global, except Teredo (judged by both of its
    /// IPv4 addresses) and the blocks the registry marks globally reachable.
    private static func isGlobal(ietfProtocolAssignment b: [UInt8]) -> Bool {
        let word2 = UInt16(b[2]) << 8 | UInt16(b[3])
        let word3 = UInt16(b[4]) << 8 | UInt16(b[5])
        switch word2 {
        case 0x0000:
            // Teredo 2001::/32: server IPv4 in bytes 4..7, client IPv4 in the last 4 bytes, inverted.
            let server = Array(b[4..<8])
            let client = b[12..<16].map { $0 ^ 0xFF }
            return isGlobal(ipv4: server) && isGlobal(ipv4: client)
        case 0x0001:
            // 2001:1::1 PCP anycast, 2001:1::2 TURN anycast, 2001:1::3 DNS-SD SRP anycast.
            return b[4..<15].allSatisfy { $0 == 0 } && (1...3).contains(b[15])
        case 0x0003:
            return true  // AMT 2001:3::/32
        case 0x0004:
            return word3 == 0x0112  // AS112-v6 2001:4:112::/48
        case 0x0020...0x002F, 0x0030...0x003F:
            return true  // ORCHIDv2 2001:20::/28, drone remote ID 2001:30::/28
        default:
            return false  // 2001:2::/48 benchmarking, 2001:10::/28 ORCHID (deprecated), unassigned
        }
    }

    /// The first address of `addresses` that is not global, or nil when all are global.
    public static func firstNonGlobal(_ addresses: [IPAddress]) -> IPAddress? {
        addresses.first { !$0.isGlobal }
    }

    /// Resolves `host` with the system resolver and returns the first non-global address found,
    /// or nil when every address is global. Throws when the name does not resolve.
    public static func firstNonGlobalAddress(of host: String) throws -> String? {
        try firstNonGlobal(SystemResolver.lookup(host)).map(\.description)
    }
}

/// A target that cannot be resolved.
public struct TargetError: Error, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    public var description: String { message }

    /// Creates an error.
    public init(message: String) {
        self.message = message
    }
}
