/// A one-dimensional array parameter (`text[]`, `bigint[]`, `timestamptz[]`, ...), sent in
/// PostgreSQL's array text form: texts quoted, integers, booleans and timestamps as they are
/// (nothing in them needs quoting), so any element type works with a cast in the statement
/// (`$1::bigint[]`).
///
/// Used to send a whole batch in one bound parameter per column, e.g. `unnest($1::bigint[])`.
public struct PostgresArray: PostgresEncodable, Sendable {
    private let literal: String

    /// Wraps elements; `nil` elements become SQL NULL.
    public init(_ elements: [(any PostgresEncodable)?]) {
        self.init(count: elements.count) { bytes in
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.append(element?.postgresValue ?? .null, to: &bytes)
            }
        }
    }

    /// Wraps elements of one type (optionals too: `nil` becomes SQL NULL), each written
    /// straight into the literal, without boxing it first. Inlinable, so each caller gets a
    /// copy specialized to its element type: unspecialized, walking the array through generic
    /// metadata cost more than writing the elements (perf, the worker's outcome batch).
    @inlinable
    public init<Element: PostgresEncodable>(_ elements: [Element]) {
        self.init(count: elements.count) { bytes in
            for index in elements.indices {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                elements[index].appendArrayElement(to: &bytes)
            }
        }
    }

    /// Built as UTF-8 bytes: the complete batch of a busy worker encodes thousands of elements
    /// per second, and appending scalar by scalar to a String showed in profiles.
    @usableFromInline
    init(count: Int, elements: (inout [UInt8]) -> Void) {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(count * 12 + 2)
        elements(&bytes)
        bytes.append(UInt8(ascii: "}"))
        literal = String(decoding: bytes, as: UTF8.self)
    }

    /// An integer's decimal digits, unquoted (an array literal needs no quotes around them).
    static func appendDigits(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes for at most 19 digits, written backwards
        let count = withUnsafeMutableBytes(of: &digits) { buffer -> Int in
            var at = 0
            repeat {
                buffer[at] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                at += 1
            } while magnitude > 0
            return at
        }
        withUnsafeBytes(of: &digits) { buffer in
            for i in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[i]) }
        }
    }

    /// One element in the array literal's text: NULL, a quoted text, or quoted bytea hex.
    static func append(_ value: PostgresValue, to bytes: inout [UInt8]) {
        switch value {
        case .null: bytes.append(contentsOf: "NULL".utf8)
        case .text(let value): appendQuoted(value, to: &bytes)
        case .bytes(let data): appendQuotedHex(data, to: &bytes)
        }
    }

    public var postgresValue: PostgresValue { .text(literal) }

    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    private static func appendQuoted(_ value: String, to bytes: inout [UInt8]) {
        let utf8 = value.utf8
        bytes.append(quote)
        defer { bytes.append(quote) }
        guard utf8.contains(where: { $0 == quote || $0 == backslash }) else {
            bytes.append(contentsOf: utf8)
            return
        }
        for byte in utf8 {
            if byte == quote || byte == backslash { bytes.append(backslash) }
            bytes.append(byte)
        }
    }

    /// A bytea element in hex form; the backslash of `\x` is escaped inside the quotes.
    private static func appendQuotedHex(_ data: [UInt8], to bytes: inout [UInt8]) {
        let digits: StaticString = "0123456789abcdef"
        bytes.append(quote)
        bytes.append(backslash)
        bytes.append(backslash)
        bytes.append(UInt8(ascii: "x"))
        digits.withUTF8Buffer { hex in
            for byte in data {
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xF)])
            }
        }
        bytes.append(quote)
    }

    /// Parses a one-dimensional array's text form (`{1,2,NULL}`, `{"a b","c"}`) into elements.
    public static func parse(_ text: String) -> [String?]? {
        let scalars = Array(text.unicodeScalars)
        guard scalars.first == "{", scalars.last == "}" else { return nil }
        var out: [String?] = []
        var i = 1
        let end = scalars.count - 1
        if end == 1 { return [] }
        while i < end {
            var element = String.UnicodeScalarView()
            if scalars[i] == "\"" {
                i += 1
                while i < end, scalars[i] != "\"" {
                    if scalars[i] == "\\" { i += 1 }
                    if i < end { element.append(scalars[i]) }
                    i += 1
                }
                i += 1
                out.append(String(element))
            } else {
                while i < end, scalars[i] != "," {
                    element.append(scalars[i])
                    i += 1
                }
                let value = String(element)
                out.append(value == "NULL" ? nil : value)
            }
            guard i == end || scalars[i] == "," else { return nil }
            i += 1
        }
        return out
    }
}
