import Foundation

/// `application/x-www-form-urlencoded` text (a query string or a form body) as name/value
/// pairs: `+` is a space, `%XX` a byte; invalid escapes are kept as written and invalid UTF-8
/// becomes U+FFFD, never an error.
struct FormData: Sendable, Equatable {
    /// Every pair, in order.
    var pairs: [(String, String)]

    static func == (lhs: FormData, rhs: FormData) -> Bool { lhs.pairs.elementsEqual(rhs.pairs, by: ==) }

    init(pairs: [(String, String)]) { self.pairs = pairs }

    /// Parses `text`; at most `limit` pairs are kept.
    init(_ text: Substring, limit: Int = 100) {
        pairs = text.split(separator: "&", omittingEmptySubsequences: true).prefix(limit).map { part in
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (Self.decode(pieces[0]), pieces.count > 1 ? Self.decode(pieces[1]) : "")
        }
    }

    /// The first value of `name`, or nil.
    subscript(name: String) -> String? { pairs.first { $0.0 == name }?.1 }

    /// The first value of `name` trimmed, nil when absent or blank.
    func nonEmpty(_ name: String) -> String? {
        guard let value = self[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    static func decode(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), iterator.count >= 2,
                let value = UInt8(String(decoding: iterator.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                iterator = iterator.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `value` escaped for a query string (everything but unreserved characters).
    static func encode(_ value: String) -> String {
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
        var result = ""
        for byte in value.utf8 {
            if unreserved.contains(byte) {
                result.append(Character(UnicodeScalar(byte)))
            } else {
                result += String(format: "%%%02X", byte)
            }
        }
        return result
    }

    /// The pairs with non-empty values as a query string (`a=1&b=x%20y`).
    static func query(_ pairs: [(String, String?)]) -> String {
        pairs.compactMap { name, value in
            guard let value, !value.isEmpty else { return nil }
            return "\(encode(name))=\(encode(value))"
        }.joined(separator: "&")
    }
}

/// The `Cookie` request header.
enum CookieHeader {
    /// The value of cookie `name` in a `Cookie` header, or nil.
    static func value(of name: String, in header: String?) -> String? {
        guard let header else { return nil }
        for part in header.split(separator: ";") {
            let pieces = part.split(separator: "=", maxSplits: 1)
            guard pieces.count == 2, pieces[0].trimmingCharacters(in: .whitespaces) == name else { continue }
            return pieces[1].trimmingCharacters(in: .whitespaces)
        }
        return nil
    }

    /// A `Set-Cookie` value for the session cookie: `HttpOnly`, `SameSite=Strict`, path `/`,
    /// `Secure` when `secure`; an empty `value` with `Max-Age=0` removes it.
    static func setCookie(name: String, value: String, secure: Bool) -> String {
        var parts = ["\(name)=\(value)", "Path=/", "HttpOnly", "SameSite=Strict"]
        if value.isEmpty { parts.append("Max-Age=0") }
        if secure { parts.append("Secure") }
        return parts.joined(separator: "; ")
    }
}
