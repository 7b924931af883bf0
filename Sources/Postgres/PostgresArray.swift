/// A one-dimensional array parameter (`text[]`, `bigint[]`, `timestamptz[]`, ...), sent in
/// PostgreSQL's array text form with every element quoted, so any element type works with a
/// cast in the statement (`$1::bigint[]`).
///
/// Used to send a whole batch in one bound parameter per column, e.g. `unnest($1::bigint[])`.
public struct PostgresArray: PostgresEncodable, Sendable {
    private let literal: String

    /// Wraps elements; `nil` elements become SQL NULL.
    public init(_ elements: [(any PostgresEncodable)?]) {
        // Built as UTF-8 bytes: the complete batch of a busy worker encodes thousands of
        // elements per second, and appending scalar by scalar to a String showed in profiles.
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(elements.count * 12 + 2)
        for (index, element) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            switch element?.postgresValue ?? .null {
            case .null: bytes.append(contentsOf: "NULL".utf8)
            case .text(let value): Self.appendQuoted(value, to: &bytes)
            case .bytes(let data): Self.appendQuotedHex(data, to: &bytes)
            }
        }
        bytes.append(UInt8(ascii: "}"))
        literal = String(decoding: bytes, as: UTF8.self)
    }

    /// Wraps non-optional elements.
    public init(_ elements: [some PostgresEncodable]) {
        self.init(elements.map { $0 as (any PostgresEncodable)? })
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
