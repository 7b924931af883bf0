#if canImport(Glibc)
    import Glibc
#endif

/// Whether an address is a global (public) one. Deliveries to anything else — private,
/// loopback, link-local, CGNAT, documentation, multicast, reserved — are refused unless
/// configuration allows private targets (DESIGN.md §4).
public enum TargetPolicy {
    /// True for a global IPv4 address (4 bytes, network order).
    public static func isGlobal(ipv4 b: [UInt8]) -> Bool {
        guard b.count == 4 else { return false }
        switch (b[0], b[1], b[2]) {
        case (0, _, _), (10, _, _), (127, _, _): return false
        case (100, 64...127, _): return false  // CGNAT
        case (169, 254, _): return false  // link-local
        case (172, 16...31, _): return false
        case (192, 0, 0), (192, 0, 2), (192, 88, 99), (192, 168, _): return false
        case (198, 18...19, _), (198, 51, 100), (203, 0, 113): return false
        case (224...255, _, _): return false  // multicast, reserved, broadcast
        default: return true
        }
    }

    /// True for a global IPv6 address (16 bytes).
    public static func isGlobal(ipv6 b: [UInt8]) -> Bool {
        guard b.count == 16 else { return false }
        if b[0..<15].allSatisfy({ $0 == 0 }) { return false }  // :: and ::1
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF {
            return isGlobal(ipv4: Array(b[12..<16]))  // IPv4-mapped
        }
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B { return isGlobal(ipv4: Array(b[12..<16])) }
        if b[0] & 0xFE == 0xFC { return false }  // unique local fc00::/7
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return false }  // link-local fe80::/10
        if b[0] == 0xFF { return false }  // multicast
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return false }  // documentation
        if b[0] == 0x01 && b[1...7].allSatisfy({ $0 == 0 }) { return false }  // discard-only 100::/64
        return true
    }

    /// Resolves `host` and returns the first non-global address found, or nil when every
    /// address is global. Throws when the name does not resolve.
    public static func firstNonGlobalAddress(of host: String) throws -> String? {
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(name, nil, &hints, &list)
        guard status == 0, let first = list else {
            throw TargetError(message: "DNS lookup of \(name) failed: \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(first) }
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let address = entry.pointee.ai_addr {
                if entry.pointee.ai_family == AF_INET {
                    let bytes = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) }
                    }
                    if !isGlobal(ipv4: bytes) { return bytes.map(String.init).joined(separator: ".") }
                } else if entry.pointee.ai_family == AF_INET6 {
                    let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) }
                    }
                    if !isGlobal(ipv6: bytes) { return name }
                }
            }
            cursor = entry.pointee.ai_next
        }
        return nil
    }
}

/// A target that cannot be resolved.
public struct TargetError: Error, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    public var description: String { message }
}
