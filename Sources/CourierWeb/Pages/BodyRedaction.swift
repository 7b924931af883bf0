import CourierCore
import Foundation

/// A stored request body as the console shows it. The CLI prints bodies as stored; a page is
/// easier to share than a terminal, so the console hides more:
///
/// - in JSON, the value of every member whose name looks secret (`Redaction.isSecretName`:
///   `"password"`, `"api_key"`, `"token"`...) becomes `"***"`, whatever its type;
/// - every line then goes through `Redaction.message`: URLs lose their credentials and secret
///   query values, `name=value` pairs (form bodies) and `Secret-Header: value` lines lose
///   their values, control characters go;
/// - bytes that are not UTF-8 are shown as `\xNN`;
/// - at most `limit` characters are shown.
enum BodyRedaction {
    /// The body as it may be shown, and whether it was cut.
    static func show(_ body: [UInt8], limit: Int = 8_000) -> (text: String, clipped: Bool) {
        let clipped = body.count > limit
        let text = decode(body.prefix(limit))
        let json = redactJSONMembers(text)
        let lines = json.split(separator: "\n", omittingEmptySubsequences: false).map { Redaction.message(String($0)) }
        return (lines.joined(separator: "\n"), clipped)
    }

    /// UTF-8 text, with every byte of an invalid sequence written `\xNN`.
    static func decode(_ bytes: ArraySlice<UInt8>) -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        var result = ""
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let length = sequenceLength(bytes[index])
            let end = bytes.index(index, offsetBy: length, limitedBy: bytes.endIndex) ?? bytes.endIndex
            if length > 0, let scalar = String(validating: bytes[index..<end], as: UTF8.self), end - index == length {
                result += scalar
                index = end
            } else {
                result += String(format: "\\x%02X", bytes[index])
                index += 1
            }
        }
        return result
    }

    private static func sequenceLength(_ lead: UInt8) -> Int {
        switch lead {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: return 2
        case 0xE0...0xEF: return 3
        case 0xF0...0xF4: return 4
        default: return 0
        }
    }

    /// Replaces the value of every JSON member whose name looks secret with `"***"`. Works on
    /// text that is not JSON (a member is any `"name"` followed by `:`), keeping the layout.
    static func redactJSONMembers(_ text: String) -> String {
        let chars = Array(text)
        var out = ""
        out.reserveCapacity(chars.count)
        var i = 0
        while i < chars.count {
            guard chars[i] == "\"" else {
                out.append(chars[i])
                i += 1
                continue
            }
            let end = stringEnd(chars, from: i)
            let name = String(chars[(i + 1)..<max(i + 1, end - 1)])
            out += String(chars[i..<end])
            i = end
            var colon = i
            while colon < chars.count, chars[colon].isWhitespace { colon += 1 }
            guard colon < chars.count, chars[colon] == ":", Redaction.isSecretName(name) else { continue }
            var valueStart = colon + 1
            while valueStart < chars.count, chars[valueStart].isWhitespace { valueStart += 1 }
            out += String(chars[i..<valueStart])
            let valueEnd = self.valueEnd(chars, from: valueStart)
            out += "\"\(Redaction.marker)\""
            i = valueEnd
        }
        return out
    }

    /// The index after the string literal that starts at `start` (a quote).
    private static func stringEnd(_ chars: [Character], from start: Int) -> Int {
        var i = start + 1
        while i < chars.count {
            if chars[i] == "\\" { i += 2; continue }
            if chars[i] == "\"" { return i + 1 }
            i += 1
        }
        return chars.count
    }

    /// The index after the JSON value that starts at `start`: a string, an object or array
    /// (brackets matched outside strings), or a bare literal.
    private static func valueEnd(_ chars: [Character], from start: Int) -> Int {
        guard start < chars.count else { return start }
        switch chars[start] {
        case "\"":
            return stringEnd(chars, from: start)
        case "{", "[":
            var depth = 0
            var i = start
            while i < chars.count {
                switch chars[i] {
                case "\"": i = stringEnd(chars, from: i); continue
                case "{", "[": depth += 1
                case "}", "]":
                    depth -= 1
                    if depth == 0 { return i + 1 }
                default: break
                }
                i += 1
            }
            return chars.count
        default:
            var i = start
            while i < chars.count, !",}]\n".contains(chars[i]) { i += 1 }
            return i
        }
    }
}
