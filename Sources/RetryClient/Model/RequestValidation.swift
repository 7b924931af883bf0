import Foundation

/// Why a request must not be written to the wire.
///
/// A request that fails these checks would be rejected by the receiver at best and, at worst,
/// be misread by it (a CR LF in the method or a header value splits one request into two) or
/// trip a precondition in the HTTP stack (a port above 65535, a non-ASCII header name). It can
/// never succeed later, so callers treat it as permanent.
public struct RequestValidationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Which part of the request is wrong; stable, suitable as a metric label.
    public enum Field: String, Sendable, Equatable, CaseIterable {
        case method, url, headers, connectAddress
    }

    /// The part of the request that is wrong.
    public var field: Field
    /// One line naming the problem; never echoes control characters.
    public var message: String

    /// Creates an error.
    public init(field: Field, message: String) {
        self.field = field
        self.message = message
    }

    /// `"method: ..."`.
    public var description: String { "\(field.rawValue): \(message)" }
}

/// The bounds ``RequestValidation`` applies besides the syntax rules.
public struct RequestLimits: Sendable, Equatable {
    /// Longest method name in bytes. Default 32.
    public var maximumMethodBytes: Int = 32
    /// Longest URL in bytes. Default 16,384.
    public var maximumURLBytes: Int = 16_384
    /// Most header fields. Default 128 (Courier's enqueue allows 64, the worker adds a few).
    public var maximumHeaderCount: Int = 128
    /// Most bytes of all header names and values together. Default 1 MiB.
    public var maximumHeaderBytes: Int = 1 << 20

    /// The defaults above.
    public init() {}
}

/// The pure checks a request passes right before it is written: the last line of defence
/// against rows that bypassed the producer-side validation.
///
/// - The method is an RFC 9110 token (`1*tchar`).
/// - The URL is `http` or `https`, has no spaces, control characters or non-ASCII bytes, has a
///   host, and its port (when written) is 1-65535. Foundation must read the same host and port,
///   so a parser differential cannot send the request elsewhere.
/// - Header names are tokens; values contain no control character other than HTAB (so no CR,
///   LF or NUL); obs-text (bytes 0x80-0xFF) is allowed. Count and total size are bounded.
/// - A ``OutboundRequest/connectAddress`` is an IPv4 or IPv6 literal.
public enum RequestValidation {
    /// Throws the first problem of `request`; returns the URL's scheme, host and port when it
    /// may be sent.
    @discardableResult
    public static func validate(
        _ request: OutboundRequest, limits: RequestLimits = .init()
    ) throws -> (scheme: String, host: String, port: Int) {
        try validate(method: request.method, limits: limits)
        let target: (scheme: String, host: String, port: Int)
        if let checked = request.checkedURL, checked.url == request.url,
            request.url.utf8.count <= limits.maximumURLBytes
        {
            target = checked.target
        } else {
            target = try self.target(ofURL: request.url, limits: limits)
        }
        try validate(headers: request.headers, limits: limits)
        if let address = request.connectAddress, !isIPLiteral(address) {
            throw RequestValidationError(
                field: .connectAddress, message: "\(printable(address)) is not an IP address")
        }
        return target
    }

    /// Throws unless `method` is a token of at most `limits.maximumMethodBytes` bytes.
    public static func validate(method: String, limits: RequestLimits = .init()) throws {
        // Read in place, as the header fields are: a copy of the bytes was two allocations
        // per delivery (the method is checked by the deliverer and again by the transport).
        let bytes = method.utf8
        guard !bytes.isEmpty else {
            throw RequestValidationError(field: .method, message: "is empty")
        }
        guard bytes.count <= limits.maximumMethodBytes else {
            throw RequestValidationError(
                field: .method, message: "is longer than \(limits.maximumMethodBytes) bytes")
        }
        guard everyByte(of: method, isTokenByte) else {
            throw RequestValidationError(
                field: .method, message: "\(printable(method)) is not an HTTP token (no spaces, CR, LF or separators)")
        }
    }

    /// The scheme, host (brackets removed, as written) and port of `url`, or the problem.
    ///
    /// Once every byte is known to be printable ASCII, the URL is taken apart byte by byte:
    /// every delivery runs this (the deliverer, whose answer the transport reuses through
    /// `validateRemembering`), and walking it by `Character`, with Foundation's `range(of:)`,
    /// was a seventh of a worker's CPU. The answers for URLs seen lately are kept
    /// (``URLTargetMemo``): a worker sends to the same URLs over and over, and taking one apart,
    /// Foundation's parse included, cost 2 % of its CPU per delivery.
    public static func target(
        ofURL url: String, limits: RequestLimits = .init()
    ) throws -> (scheme: String, host: String, port: Int) {
        guard url.utf8.count <= limits.maximumURLBytes, let known = URLTargetMemo.shared.target(of: url) else {
            let target = try parseTarget(ofURL: url, limits: limits)
            URLTargetMemo.shared.remember(url, target)
            return target
        }
        return known
    }

    /// ``target(ofURL:limits:)`` without the memo: the URL taken apart.
    static func parseTarget(
        ofURL url: String, limits: RequestLimits = .init()
    ) throws -> (scheme: String, host: String, port: Int) {
        func fail(_ message: String) -> RequestValidationError {
            RequestValidationError(field: .url, message: message)
        }
        let bytes = Array(url.utf8)
        guard bytes.count <= limits.maximumURLBytes else {
            throw fail("is longer than \(limits.maximumURLBytes) bytes")
        }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw fail("contains a space, a control character or a non-ASCII byte")
        }
        func text(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }
        guard let separator = firstSeparator(in: bytes) else {
            throw fail("\(printable(url)) is not an absolute http or https URL")
        }
        let scheme = text(0..<separator).lowercased()
        guard scheme == "http" || scheme == "https" else {
            throw fail("scheme \(printable(scheme)) is not http or https")
        }
        let restStart = separator + 3
        var authorityEnd = restStart
        while authorityEnd < bytes.count, !isAuthorityEnd(bytes[authorityEnd]) { authorityEnd += 1 }
        var authorityStart = restStart
        if let at = bytes[restStart..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) {
            authorityStart = at + 1
        }
        let host: Range<Int>
        var portText: Range<Int>?
        if authorityStart < authorityEnd, bytes[authorityStart] == UInt8(ascii: "[") {
            guard let close = bytes[authorityStart..<authorityEnd].firstIndex(of: UInt8(ascii: "]")) else {
                throw fail("has an unclosed IPv6 literal")
            }
            host = (authorityStart + 1)..<close
            if close + 1 < authorityEnd {
                guard bytes[close + 1] == UInt8(ascii: ":") else { throw fail("has text after the IPv6 literal") }
                portText = (close + 2)..<authorityEnd
            }
            guard isIPLiteral(text(host)) else { throw fail("has an invalid IPv6 literal") }
        } else if let colon = bytes[authorityStart..<authorityEnd].firstIndex(of: UInt8(ascii: ":")) {
            host = authorityStart..<colon
            portText = (colon + 1)..<authorityEnd
        } else {
            host = authorityStart..<authorityEnd
        }
        guard !host.isEmpty else { throw fail("has no host") }
        let defaultPort = scheme == "https" ? 443 : 80
        var port = defaultPort
        if let portText {
            var value = 0
            let digits = bytes[portText]
            guard (1...5).contains(digits.count),
                digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            else {
                throw fail("port \(printable(String(text(portText).prefix(20)))) is not 1-65535")
            }
            for digit in digits { value = value * 10 + Int(digit - UInt8(ascii: "0")) }
            guard (1...65_535).contains(value) else {
                throw fail("port \(printable(text(portText))) is not 1-65535")
            }
            port = value
        }
        let hostText = text(host)
        // The HTTP stack parses the URL with Foundation: it must see the very same target.
        guard let parsed = URL(string: url), let parsedHost = parsed.host, !parsedHost.isEmpty else {
            throw fail("\(printable(url)) does not parse")
        }
        let trimmed = parsedHost.hasPrefix("[") && parsedHost.hasSuffix("]")
            ? String(parsedHost.dropFirst().dropLast()) : parsedHost
        guard trimmed.lowercased() == hostText.lowercased(), (parsed.port ?? defaultPort) == port else {
            throw fail("host or port is ambiguous")
        }
        return (scheme, hostText, port)
    }

    /// Where the first `://` of `bytes` starts.
    static func firstSeparator<Bytes: RandomAccessCollection<UInt8>>(in bytes: Bytes) -> Int?
    where Bytes.Index == Int {
        guard bytes.count >= 3 else { return nil }
        for index in 0...(bytes.count - 3)
        where bytes[index] == UInt8(ascii: ":") && bytes[index + 1] == UInt8(ascii: "/")
            && bytes[index + 2] == UInt8(ascii: "/")
        {
            return index
        }
        return nil
    }

    /// Whether `byte` ends a URL's authority: `/`, `?` or `#`.
    static func isAuthorityEnd(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#")
    }

    /// Throws unless every name is a token and every value is free of control characters,
    /// within the count and size bounds.
    public static func validate(headers: HeaderFields, limits: RequestLimits = .init()) throws {
        guard headers.count <= limits.maximumHeaderCount else {
            throw RequestValidationError(
                field: .headers, message: "\(headers.count) fields, more than \(limits.maximumHeaderCount)")
        }
        var total = 0
        for field in headers {
            // The bytes are read in place (a copy per field was a malloc and a free per field
            // of every request, twice per delivery), from the string's own storage when it has
            // one: a loop over a buffer instead of the UTF-8 view's index checks.
            let name = field.name.utf8
            guard !name.isEmpty, everyByte(of: field.name, isTokenByte) else {
                throw RequestValidationError(
                    field: .headers, message: "\(printable(field.name)) is not a legal header name (ASCII token)")
            }
            guard everyByte(of: field.value, isFieldValueByte) else {
                throw RequestValidationError(
                    field: .headers,
                    message: "the value of \(field.name) contains CR, LF, NUL or another control character")
            }
            total += name.count + field.value.utf8.count
            guard total <= limits.maximumHeaderBytes else {
                throw RequestValidationError(
                    field: .headers, message: "more than \(limits.maximumHeaderBytes) bytes of header fields")
            }
        }
    }

    /// Whether every UTF-8 byte of `text` passes `test`.
    @inline(__always)
    static func everyByte(of text: String, _ test: (UInt8) -> Bool) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(test) } ?? text.utf8.allSatisfy(test)
    }

    /// `tchar` of RFC 9110 §5.6.2.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// `field-vchar / SP / HTAB` of RFC 9110 §5.5, obs-text included.
    static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
    }

    /// Whether `text` is an IPv4 or IPv6 address literal (no brackets, no zone).
    public static func isIPLiteral(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return text.withCString { inet_pton(AF_INET, $0, &v4) == 1 || inet_pton(AF_INET6, $0, &v6) == 1 }
    }

    /// `text` with control characters replaced, cut to 100 characters, for error messages.
    static func printable(_ text: String) -> String {
        let cleaned = String(
            text.unicodeScalars.prefix(100).map { $0.properties.generalCategory == .control ? "?" : Character($0) })
        return "'" + cleaned + (text.unicodeScalars.count > 100 ? "…" : "") + "'"
    }
}

extension OutboundRequest {
    /// Throws a ``RequestValidationError`` when this request must not be sent; see
    /// ``RequestValidation``. Returns the URL's scheme, host (as written, without brackets) and port.
    @discardableResult
    public func validate(limits: RequestLimits = .init()) throws -> (scheme: String, host: String, port: Int) {
        try RequestValidation.validate(self, limits: limits)
    }

    /// ``validate(limits:)``, remembering the URL's parts in the request, so that validating it
    /// again (the transport does) costs a comparison of the URL instead of taking it apart,
    /// as long as `url` has not changed. Everything else is checked again every time.
    @discardableResult
    public mutating func validateRemembering(limits: RequestLimits = .init()) throws
        -> (scheme: String, host: String, port: Int)
    {
        let target = try RequestValidation.validate(self, limits: limits)
        checkedURL = (url, target)
        return target
    }
}

/// The targets (scheme, host, port) of the URLs that passed ``RequestValidation`` lately, so
/// that a URL sent to again is looked up instead of taken apart. An answer depends on the URL
/// alone (the length limit is checked before the lookup), and only URLs that passed are kept: a
/// refused one is taken apart, and refused, every time.
///
/// Bounded in entries and bytes: URLs of at most ``maximumURLBytes`` bytes, in two generations
/// of at most ``capacity`` entries. When the newer one is full it becomes the older one and the
/// older one is dropped; a URL found in the older one moves to the newer. A URL in use stays,
/// one not seen for two generations goes: at most 2 × 4,096 URLs of 512 bytes, 4 MiB at worst.
final class URLTargetMemo: @unchecked Sendable {
    typealias Target = (scheme: String, host: String, port: Int)

    /// The memo every validation shares.
    static let shared = URLTargetMemo()

    /// Entries per generation.
    let capacity: Int
    /// Longest URL kept, in bytes.
    let maximumURLBytes: Int

    private let lock = NSLock()
    // Guarded by `lock`.
    private var newer: [String: Target] = [:]
    private var older: [String: Target] = [:]

    init(capacity: Int = 4_096, maximumURLBytes: Int = 512) {
        self.capacity = max(1, capacity)
        self.maximumURLBytes = maximumURLBytes
    }

    /// The target remembered for `url`, or nil.
    func target(of url: String) -> Target? {
        guard url.utf8.count <= maximumURLBytes else { return nil }
        return lock.withLock {
            if let target = newer[url] { return target }
            guard let target = older[url] else { return nil }
            insert(url, target)
            return target
        }
    }

    /// Remembers the target of a URL that passed validation.
    func remember(_ url: String, _ target: Target) {
        guard url.utf8.count <= maximumURLBytes else { return }
        lock.withLock { insert(url, target) }
    }

    /// URLs remembered now, in both generations.
    var count: Int { lock.withLock { newer.count + older.count } }

    /// Forgets every URL.
    func removeAll() {
        lock.withLock {
            newer = [:]
            older = [:]
        }
    }

    // Called with `lock` held.
    private func insert(_ url: String, _ target: Target) {
        if newer.count >= capacity {
            older = newer
            newer = [:]
            newer.reserveCapacity(capacity)
        }
        newer[url] = target
    }
}
