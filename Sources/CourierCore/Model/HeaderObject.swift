/// Reads a job's `headers` column, a JSON object of strings, without Foundation's
/// `JSONSerialization`, which costs a claim of 100 jobs about a third of a millisecond.
///
/// Strict JSON: whitespace between tokens, every string escape (`\uXXXX` with surrogate
/// pairs included). Anything it does not take returns nil (another value type, nesting,
/// a repeated key, a lone surrogate, malformed text) and the caller reads the text the slow
/// way, which gives the error message: so this only ever speeds up, never changes, what a
/// valid object decodes to.
enum HeaderObject {
    /// The object's (name, value) pairs in the order written; nil when the text is not a
    /// plain JSON object of strings with distinct keys.
    static func parse(_ text: String) -> [(String, String)]? {
        var text = text
        return text.withUTF8 { bytes -> [(String, String)]? in
            var reader = Reader(bytes: bytes)
            return reader.object()
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var at = 0

        mutating func object() -> [(String, String)]? {
            skipSpace()
            guard take(UInt8(ascii: "{")) else { return nil }
            var pairs: [(String, String)] = []
            var keys = Set<String>()
            skipSpace()
            if take(UInt8(ascii: "}")) { return end() ? pairs : nil }
            while true {
                skipSpace()
                guard let key = string(), keys.insert(key).inserted else { return nil }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard let value = string() else { return nil }
                pairs.append((key, value))
                skipSpace()
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                return end() ? pairs : nil
            }
        }

        /// True when only whitespace is left.
        private mutating func end() -> Bool {
            skipSpace()
            return at == bytes.count
        }

        private mutating func skipSpace() {
            while at < bytes.count {
                switch bytes[at] {
                case 0x20, 0x09, 0x0A, 0x0D: at += 1
                default: return
                }
            }
        }

        private mutating func take(_ byte: UInt8) -> Bool {
            guard at < bytes.count, bytes[at] == byte else { return false }
            at += 1
            return true
        }

        /// A JSON string starting at the quote; the input is valid UTF-8 (it came from a
        /// `String`), so runs between quotes and backslashes are copied as they are.
        private mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            var out: [UInt8] = []
            var runStart = at
            while at < bytes.count {
                let byte = bytes[at]
                if byte == UInt8(ascii: "\"") {
                    let run = UnsafeBufferPointer(rebasing: bytes[runStart..<at])
                    at += 1
                    if out.isEmpty { return String(decoding: run, as: UTF8.self) }
                    out.append(contentsOf: run)
                    return String(decoding: out, as: UTF8.self)
                }
                if byte < 0x20 { return nil }
                if byte != UInt8(ascii: "\\") {
                    at += 1
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<at]))
                at += 1
                guard at < bytes.count else { return nil }
                let escape = bytes[at]
                at += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return nil }
                    out.append(contentsOf: String(Character(scalar)).utf8)
                default: return nil
                }
                runStart = at
            }
            return nil
        }

        /// The scalar of `\uXXXX` (the `\u` already read), joining a surrogate pair.
        private mutating func unicodeEscape() -> Unicode.Scalar? {
            guard let first = hex4() else { return nil }
            if (0xD800...0xDBFF).contains(first) {
                guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let second = hex4(),
                    (0xDC00...0xDFFF).contains(second)
                else { return nil }
                return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
            }
            return Unicode.Scalar(first)
        }

        private mutating func hex4() -> UInt32? {
            guard at + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[at]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
                at += 1
            }
            return value
        }
    }
}
