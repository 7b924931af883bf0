import Foundation

/// Removes secrets and terminal control from text before it leaves the process: CLI output
/// (human and JSON), error messages, logs and stored `last_error`.
///
/// Every rule is a scan of the text itself, without parsing it as a URL first: the values that
/// most need hiding are the ones that do not parse (a database URL with a typo echoes its
/// password in libpq's error). Each function is total: any input gives an output, never a throw.
///
/// - `url(_:)`: user-info (`scheme://user:pass@`) becomes `***@`; values of query (and fragment)
///   parameters whose names look secret become `***`; control characters are dropped.
/// - `headerValue(name:value:)`: the value of a header whose name looks secret becomes
///   `<redacted, N bytes>`.
/// - `connectionError(_:conninfo:)`: a libpq message about `conninfo` without its password.
/// - `message(_:)`: free text (an error, a log line) with every URL, `name=value` pair and
///   `Secret-Header: value` inside it redacted, on one line, without control characters.
/// - `text(_:)`: control characters and ANSI escape sequences removed, nothing else changed.
public enum Redaction {
    /// What replaces a secret in URLs, connection strings and free text.
    public static let marker = "***"

    /// Parts of a parameter or header name that mark its value as a secret (matched
    /// case-insensitively anywhere in the name: `X-Api-Credential`, `access_token`, `sig`).
    public static let secretWords: [String] = [
        "token", "key", "secret", "password", "passwd", "pwd", "signature", "sig", "auth", "credential",
        "cookie", "session", "hmac", "jwt", "bearer", "private", "otp",
    ]

    /// Header names whose values are secrets even though no `secretWords` entry names them.
    public static let secretHeaderNames: Set<String> = [
        "authorization", "proxy-authorization", "x-api-key", "cookie", "set-cookie", "api-key",
    ]

    // MARK: Names

    /// Whether a query, form or conninfo parameter named `name` carries a secret.
    public static func isSecretName(_ name: String) -> Bool {
        let lower = name.lowercased()
        return secretWords.contains { lower.contains($0) }
    }

    /// Whether the header `name` carries a secret.
    public static func isSecretHeader(_ name: String) -> Bool {
        let lower = name.lowercased()
        return secretHeaderNames.contains(lower) || isSecretName(lower)
    }

    // MARK: Values

    /// The value of header `name` as it may be shown: secrets become `<redacted, N bytes>`,
    /// other values lose their control characters.
    public static func headerValue(name: String, value: String) -> String {
        isSecretHeader(name) ? "<redacted, \(value.utf8.count) bytes>" : text(value)
    }

    /// `url` as it may be shown: user-info replaced by `***`, values of secret-looking query and
    /// fragment parameters replaced by `***`, control characters removed. Works on text that
    /// is not a valid URL.
    public static func url(_ url: String) -> String {
        text(redactURLs(in: url))
    }

    /// A connection string (libpq URI or `key=value` conninfo) without its password, whether
    /// or not it parses.
    public static func connectionString(_ conninfo: String) -> String {
        message(replacing(connectionSecrets(conninfo), in: conninfo))
    }

    /// A libpq error message about `conninfo` with every trace of the password removed: the
    /// password itself (raw and percent-decoded), and the words libpq quotes from a password
    /// it could not parse (`missing "=" after "pw"`).
    public static func connectionError(_ message: String, conninfo: String) -> String {
        var result = replacing(connectionSecrets(conninfo), in: message)
        for word in passwordWords(conninfo) {
            result = result.replacingOccurrences(of: "\"\(word)\"", with: "\"\(marker)\"")
        }
        return Self.message(result)
    }

    /// Free text (an error message, a log line) made safe to print on one line: URLs inside it
    /// go through `url(_:)`, `name=value` pairs with secret-looking names and
    /// `Secret-Header: value` get `***` as value, and control characters (CR, LF, TAB, ESC
    /// sequences...) are removed or turned into spaces.
    public static func message(_ text: String) -> String {
        oneLine(redactHeaderLines(in: redactPairs(in: redactURLs(in: text))))
    }

    /// `text` without ANSI escape sequences and control characters (C0, DEL, C1, and the
    /// Unicode bidirectional overrides); newlines and tabs are removed too. Use `message(_:)`
    /// for text that may also hold secrets.
    public static func text(_ text: String) -> String {
        strip(text, spaces: false)
    }

    /// `text` on one line: CR, LF and TAB become spaces, other control characters and escape
    /// sequences are removed.
    public static func oneLine(_ text: String) -> String {
        strip(text, spaces: true)
    }

    // MARK: Scanning

    /// Characters that end a URL or a value inside free text.
    private static func endsToken(_ c: Character) -> Bool {
        c.isWhitespace || c == "\"" || c == "'" || c == "<" || c == ">" || c == "`"
    }

    /// Redacts every `scheme://...` inside `text`.
    static func redactURLs(in text: String) -> String {
        let chars = Array(text)
        guard chars.count >= 3 else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count)
        var i = 0
        while i < chars.count {
            if i + 2 < chars.count, chars[i] == ":", chars[i + 1] == "/", chars[i + 2] == "/" {
                out += "://"
                i += 3
                var end = i
                while end < chars.count, !endsToken(chars[end]) { end += 1 }
                // A password may hold spaces or quotes: when an `@` follows within the same
                // stretch of text before any `/`, treat all of it as user-info.
                let first = chars[i..<end].prefix { $0 != "/" }
                if !first.contains("@"), let colon = first.firstIndex(of: ":"),
                    !first[(colon + 1)...].allSatisfy(\.isNumber)
                {
                    var probe = end
                    while probe < chars.count, chars[probe] != "@", chars[probe] != "/", chars[probe] != "\n" {
                        probe += 1
                    }
                    if probe < chars.count, chars[probe] == "@", probe > end {
                        end = probe + 1
                        while end < chars.count, !endsToken(chars[end]) { end += 1 }
                    }
                }
                out += redactURLRest(chars[i..<end])
                i = end
            } else {
                out.append(chars[i])
                i += 1
            }
        }
        return out
    }

    /// Redacts the part of a URL after `://`: user-info, then secret parameters.
    private static func redactURLRest(_ rest: ArraySlice<Character>) -> String {
        var authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        // `user:pa/ss@host`: a colon followed by something that is not a port, then an `@`.
        if let at = rest.lastIndex(of: "@"), at >= authorityEnd, let colon = rest[..<authorityEnd].firstIndex(of: ":"),
            !rest[rest.index(after: colon)..<authorityEnd].allSatisfy(\.isNumber)
        {
            authorityEnd = at
            while authorityEnd < rest.endIndex, !"/?#".contains(rest[authorityEnd]) { authorityEnd += 1 }
        }
        var result = ""
        let authority = rest[rest.startIndex..<authorityEnd]
        if let at = authority.lastIndex(of: "@") {
            result += marker + "@" + String(authority[authority.index(after: at)...])
        } else {
            result += String(authority)
        }
        var i = authorityEnd
        while i < rest.endIndex {
            let c = rest[i]
            result.append(c)
            i += 1
            if c == "?" || c == "#" || c == "&" || c == ";" {
                i = appendParameter(rest, from: i, to: &result)
            }
        }
        return result
    }

    /// Appends `name=value` starting at `start`, the value redacted when the name looks secret;
    /// returns the index after the value.
    private static func appendParameter(
        _ chars: ArraySlice<Character>, from start: Int, to result: inout String
    ) -> Int {
        var i = start
        while i < chars.endIndex, chars[i] != "=", !"&;#?".contains(chars[i]) { i += 1 }
        let name = String(chars[start..<i])
        result += name
        guard i < chars.endIndex, chars[i] == "=" else { return i }
        result += "="
        i += 1
        var end = i
        while end < chars.endIndex, !"&;#".contains(chars[end]) { end += 1 }
        let decoded = name.removingPercentEncoding ?? name
        let value = String(chars[i..<end])
        // A URL in a parameter (`?next=https://u:p@host`) gets the same treatment.
        result += isSecretName(decoded) ? marker : value.contains("://") ? redactURLs(in: value) : value
        return end
    }

    /// Redacts `name=value` pairs in free text whose names look secret (`password=...` of a
    /// conninfo, `token=...` outside a URL). A value in single quotes runs to the closing quote.
    static func redactPairs(in text: String) -> String {
        let chars = Array(text)
        var out = ""
        var i = 0
        var nameStart = 0
        while i < chars.count {
            let c = chars[i]
            if c == "=", i > nameStart {
                let name = String(chars[nameStart..<i])
                out.append(c)
                i += 1
                if isSecretName(name) {
                    var end = i
                    if end < chars.count, chars[end] == "'" {
                        end += 1
                        while end < chars.count, chars[end] != "'" {
                            if chars[end] == "\\" { end += 1 }
                            end += 1
                        }
                        end = min(end + 1, chars.count)
                    } else {
                        while end < chars.count, !endsToken(chars[end]), !"&;,)".contains(chars[end]) { end += 1 }
                    }
                    if end > i, String(chars[i..<end]) != marker { out += marker }
                    else { out += String(chars[i..<end]) }
                    i = end
                }
                nameStart = i
                continue
            }
            out.append(c)
            if !(c.isLetter || c.isNumber || c == "_" || c == "-" || c == ".") { nameStart = i + 1 }
            i += 1
        }
        return out
    }

    /// Redacts `Name: value` in free text when `Name` is a secret header name of header shape
    /// (`Authorization`, `X-Api-Credential`): the value runs to the end of the line.
    static func redactHeaderLines(in text: String) -> String {
        guard text.contains(":") else { return text }
        var lines: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lines.append(redactHeaderLine(String(line)))
        }
        return lines.joined(separator: "\n")
    }

    private static func redactHeaderLine(_ line: String) -> String {
        let chars = Array(line)
        var i = 0
        while i < chars.count {
            guard chars[i] == ":", i + 1 < chars.count, chars[i + 1] == " " else {
                i += 1
                continue
            }
            var start = i
            while start > 0, isNameCharacter(chars[start - 1]) { start -= 1 }
            let name = String(chars[start..<i])
            let headerShaped = name.contains("-") || secretHeaderNames.contains(name.lowercased())
            if !name.isEmpty, headerShaped, isSecretHeader(name) {
                return String(chars[..<(i + 2)]) + marker
            }
            i += 1
        }
        return line
    }

    private static func isNameCharacter(_ c: Character) -> Bool {
        c.isLetter || c.isNumber || c == "-" || c == "_"
    }

    // MARK: Connection strings

    /// The password of a connection string, found without parsing it: the user-info password of
    /// a URI, its `password=` query parameter, and a conninfo's `password=` value (quoted or
    /// not, terminated or not). Raw and percent-decoded forms.
    public static func connectionSecrets(_ conninfo: String) -> [String] {
        var secrets: [String] = []
        if let schemeEnd = conninfo.range(of: "://") {
            let rest = conninfo[schemeEnd.upperBound...]
            let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
            let authority = rest[..<authorityEnd]
            var at = authority.lastIndex(of: "@")
            // `user:pa/ss@host`: a colon followed by something that is not a port, `@` later.
            if at == nil, let colon = authority.firstIndex(of: ":"),
                !authority[authority.index(after: colon)...].allSatisfy(\.isNumber)
            {
                at = rest.lastIndex(of: "@")
            }
            if let at, let colon = rest[..<at].firstIndex(of: ":") {
                secrets.append(String(rest[rest.index(after: colon)..<at]))
            }
        }
        var search = conninfo[...]
        while let found = search.range(of: "password", options: .caseInsensitive) {
            var i = found.upperBound
            while i < search.endIndex, search[i] == " " { i = search.index(after: i) }
            search = search[found.upperBound...]
            guard i < search.endIndex, search[i] == "=" else { continue }
            i = search.index(after: i)
            while i < search.endIndex, search[i] == " " { i = search.index(after: i) }
            var value = ""
            if i < search.endIndex, search[i] == "'" {
                i = search.index(after: i)
                while i < search.endIndex, search[i] != "'" {
                    if search[i] == "\\" { i = search.index(after: i); if i == search.endIndex { break } }
                    value.append(search[i])
                    i = search.index(after: i)
                }
            } else {
                while i < search.endIndex, !search[i].isWhitespace, search[i] != "&" {
                    value.append(search[i])
                    i = search.index(after: i)
                }
            }
            secrets.append(value)
            search = search[i...]
        }
        var all: [String] = []
        for secret in secrets where !secret.isEmpty {
            all.append(secret)
            if let decoded = secret.removingPercentEncoding, decoded != secret { all.append(decoded) }
        }
        // Longest first, so a password that contains another is replaced whole.
        return Array(Set(all)).sorted { $0.count > $1.count }
    }

    /// The words after `password=` in a conninfo up to the next `keyword=`: what libpq may quote
    /// back when a password with a space makes the string unparseable.
    static func passwordWords(_ conninfo: String) -> [String] {
        guard let found = conninfo.range(of: "password", options: .caseInsensitive) else { return [] }
        var words: [String] = []
        for word in conninfo[found.upperBound...].split(whereSeparator: \.isWhitespace) {
            var token = String(word)
            if words.isEmpty, token.hasPrefix("=") { token.removeFirst() }
            if !words.isEmpty, token.contains("=") { break }
            let trimmed = token.trimmingCharacters(in: CharacterSet(charactersIn: "'"))
            if !trimmed.isEmpty { words.append(trimmed) }
            if !token.isEmpty { words.append(token) }
        }
        return words
    }

    /// Replaces each secret of four characters or more; shorter ones would garble the text and
    /// are caught by the pattern rules (`:pw@`, `password=pw`) instead.
    private static func replacing(_ secrets: [String], in text: String) -> String {
        var result = text
        for secret in secrets where secret.count >= 4 {
            result = result.replacingOccurrences(of: secret, with: marker)
        }
        return result
    }

    // MARK: Control characters

    private static func strip(_ text: String, spaces: Bool) -> String {
        var out = String.UnicodeScalarView()
        var scalars = text.unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            switch scalar.value {
            case 0x1B:
                // ESC: drop the escape sequence (CSI `ESC [ ... final`, OSC `ESC ] ... BEL/ST`,
                // or a two-character escape).
                guard let next = scalars.next() else { break }
                if next == "[" {
                    while let c = scalars.next(), !(0x40...0x7E).contains(c.value) {}
                } else if next == "]" {
                    while let c = scalars.next() {
                        if c.value == 0x07 { break }
                        if c.value == 0x1B { _ = scalars.next(); break }
                    }
                }
            case 0x0A, 0x0D, 0x09:
                if spaces { out.append(" ") }
            case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069:
                break
            default:
                out.append(scalar)
            }
        }
        return String(out)
    }
}
