import Foundation

/// Why an ``APIClient`` call did not produce a decoded response.
///
/// Every case prints as one line that is safe to log: response excerpts are cut short and the
/// values of fields named like secrets (`access_token`, `client_secret`, `password`...) are
/// replaced by `***`.
public enum APIError: Error, Sendable, CustomStringConvertible {
    /// The request could not be built: a bad base URL or path, or a body that does not encode.
    case invalidRequest(String)
    /// The server answered with a status other than 2xx. `bodyExcerpt` is at most
    /// ``APIError/maximumExcerptCharacters`` characters, secrets redacted. `retryAfter` is the
    /// delay the retriers asked for when the call ended because it was longer than the client
    /// waits in process; `nil` when the call gave up.
    case status(code: Int, reason: String, bodyExcerpt: String, retryAfter: Duration?)
    /// A 2xx response whose body is not the expected type.
    case decoding(type: String, message: String, bodyExcerpt: String)
    /// No response arrived. `retryAfter` as for ``status(code:reason:bodyExcerpt:retryAfter:)``.
    case transport(TransportError, retryAfter: Duration?)
    /// A ``RequestAdapter`` failed before the request was sent.
    case adapter(String)

    /// The longest excerpt of a response body kept in an error.
    public static let maximumExcerptCharacters = 300

    /// The HTTP status, when the server answered.
    public var status: Int? {
        if case .status(let code, _, _, _) = self { return code }
        return nil
    }

    /// The `error` field of an OAuth2-style or problem JSON body (`"invalid_client"`), when
    /// the excerpt is such an object.
    public var errorCode: String? {
        guard case .status(_, _, let excerpt, _) = self,
            let object = try? JSONSerialization.jsonObject(with: Data(excerpt.utf8)) as? [String: Any],
            let code = object["error"] as? String
        else { return nil }
        return Self.printable(code, limit: 64)
    }

    /// One line: `"HTTP 401 Unauthorized: {\"error\":\"invalid_client\"}"`.
    public var description: String {
        switch self {
        case .invalidRequest(let message):
            return "invalid request: \(message)"
        case .status(let code, let reason, let excerpt, _):
            let head = reason.isEmpty ? "HTTP \(code)" : "HTTP \(code) \(reason)"
            return excerpt.isEmpty ? head : "\(head): \(excerpt)"
        case .decoding(let type, let message, let excerpt):
            return "cannot decode \(type): \(message)" + (excerpt.isEmpty ? "" : " (body: \(excerpt))")
        case .transport(let error, _):
            return error.description
        case .adapter(let message):
            return "request adapter failed: \(message)"
        }
    }

    /// A bounded, printable, redacted excerpt of a response body.
    public static func redactedExcerpt(_ bytes: [UInt8]) -> String {
        var text = String(decoding: bytes.prefix(4 * maximumExcerptCharacters), as: UTF8.self)
        for pattern in secretPatterns {
            let range = NSRange(text.startIndex..., in: text)
            text = pattern.regex.stringByReplacingMatches(in: text, range: range, withTemplate: pattern.template)
        }
        return printable(text, limit: maximumExcerptCharacters)
    }

    /// Control characters escaped, cut to `limit` characters with `…`.
    static func printable(_ text: String, limit: Int) -> String {
        var out = ""
        var count = 0
        for scalar in text.unicodeScalars {
            let piece: String
            switch scalar {
            case "\n": piece = "\\n"
            case "\r": piece = "\\r"
            case "\t": piece = " "
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                piece = "\\u{\(String(scalar.value, radix: 16))}"
            default: piece = String(scalar)
            }
            if count + piece.count > limit {
                out += "…"
                break
            }
            out += piece
            count += piece.count
        }
        return out
    }

    private static let secretName = "[A-Za-z0-9_-]*(?:token|secret|password|passwd|key|assertion|code|credential)[A-Za-z0-9_-]*"
    private static let secretPatterns: [(regex: NSRegularExpression, template: String)] = [
        // JSON: "access_token": "abc"  →  "access_token": "***"
        (try! NSRegularExpression(pattern: "(\"\(secretName)\"\\s*:\\s*)\"(?:[^\"\\\\]|\\\\.)*\"", options: [.caseInsensitive]), "$1\"***\""),
        // Form or query: access_token=abc  →  access_token=***
        (try! NSRegularExpression(pattern: "(\\b\(secretName)=)[^&\\s\"]*", options: [.caseInsensitive]), "$1***"),
    ]
}
