import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Turns a host name into addresses: the one DNS step of a delivery. The worker checks every
/// address it returns and then connects to one of them, never resolving the name again, so a
/// second, different answer (DNS rebinding) cannot steer the connection.
///
/// Production uses ``SystemResolver``; tests inject a stub that changes its answer.
public protocol HostResolver: Sendable {
    /// The addresses of `host` (a name, never a literal), in the order to try them.
    ///
    /// - Throws: ``TargetError`` when the name does not resolve.
    func resolve(_ host: String) async throws -> [IPAddress]
}

/// `getaddrinfo`, run on a Dispatch queue so a slow lookup never blocks the few threads of the
/// Swift concurrency pool.
public struct SystemResolver: HostResolver {
    /// Creates the resolver.
    public init() {}

    public func resolve(_ host: String) async throws -> [IPAddress] {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try Self.lookup(host) })
            }
        }
    }

    /// The blocking lookup: every TCP address of `host`, duplicates removed, in resolver order.
    static func lookup(_ host: String) throws -> [IPAddress] {
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(name, nil, &hints, &list)
        guard status == 0, let first = list else {
            throw TargetError(message: "DNS lookup of \(name) failed: \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(first) }
        var addresses: [IPAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            cursor = entry.pointee.ai_next
            guard let address = entry.pointee.ai_addr else { continue }
            let bytes: [UInt8]
            if entry.pointee.ai_family == AF_INET {
                bytes = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) }
                }
            } else if entry.pointee.ai_family == AF_INET6 {
                bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) }
                }
            } else {
                continue
            }
            if let ip = IPAddress(bytes: bytes), !addresses.contains(ip) { addresses.append(ip) }
        }
        guard !addresses.isEmpty else { throw TargetError(message: "DNS lookup of \(name) returned no address") }
        return addresses
    }
}

/// Fixed answers for some names, the system resolver for the rest: `courier worker --resolve`,
/// like curl's `--resolve`, for a receiver whose name DNS does not know yet and for benchmarks
/// that give one local receiver many names. The addresses still go through the target checks.
public struct OverrideResolver: HostResolver {
    /// One fixed answer: `name` exactly, or every name under it when `name` starts with `*.`.
    public struct Entry: Sendable, Equatable {
        /// A lower-case host name, or `*.` and a suffix.
        public var name: String
        /// The address returned.
        public var address: IPAddress

        /// Parses `NAME=ADDRESS` (e.g. `*.localhost=127.0.0.1`); nil when it is not one.
        public init?(_ text: String) {
            guard let equals = text.firstIndex(of: "=") else { return nil }
            let name = text[..<equals].lowercased()
            let addressText = String(text[text.index(after: equals)...])
            let bare = name.hasPrefix("*.") ? String(name.dropFirst(2)) : name
            guard !bare.isEmpty, bare.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_" }),
                let address = IPAddress(addressText)
            else { return nil }
            self.name = name
            self.address = address
        }

        func matches(_ host: String) -> Bool {
            if name.hasPrefix("*.") { return host.hasSuffix(name.dropFirst(1)) && host.count > name.count - 1 }
            return host == name
        }
    }

    /// The fixed answers, first match wins.
    public let entries: [Entry]
    /// The resolver for every other name.
    public let fallback: any HostResolver

    /// Creates a resolver.
    public init(entries: [Entry], fallback: any HostResolver = SystemResolver()) {
        self.entries = entries
        self.fallback = fallback
    }

    public func resolve(_ host: String) async throws -> [IPAddress] {
        let name = host.lowercased()
        if let entry = entries.first(where: { $0.matches(name) }) { return [entry.address] }
        return try await fallback.resolve(host)
    }
}
