/// A one-dimensional array parameter (`text[]`, `bigint[]`, `timestamptz[]`, ...), sent in
/// PostgreSQL's array text form with every element quoted, so any element type works with a
/// cast in the statement (`$1::bigint[]`).
///
/// Used to send a whole batch in one bound parameter per column, e.g. `unnest($1::bigint[])`.
public struct PostgresArray: PostgresEncodable, Sendable {
    private let literal: String

    /// Wraps elements; `nil` elements become SQL NULL.
    public init(_ elements: [(any PostgresEncodable)?]) {
        var text = "{"
        text.reserveCapacity(elements.count * 8 + 2)
        for (index, element) in elements.enumerated() {
            if index > 0 { text.append(",") }
            switch element?.postgresValue ?? .null {
            case .null: text.append("NULL")
            case .text(let value): Self.appendQuoted(value, to: &text)
            case .bytes(let bytes): Self.appendQuoted(Self.hex(bytes), to: &text)
            }
        }
        text.append("}")
        literal = text
    }

    /// Wraps non-optional elements.
    public init(_ elements: [some PostgresEncodable]) {
        self.init(elements.map { $0 as (any PostgresEncodable)? })
    }

    public var postgresValue: PostgresValue { .text(literal) }

    private static func appendQuoted(_ value: String, to text: inout String) {
        text.append("\"")
        for character in value.unicodeScalars {
            if character == "\"" || character == "\\" { text.append("\\") }
            text.unicodeScalars.append(character)
        }
        text.append("\"")
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8](repeating: 0, count: 2 + bytes.count * 2)
        out[0] = UInt8(ascii: "\\")
        out[1] = UInt8(ascii: "x")
        for (i, byte) in bytes.enumerated() {
            out[2 + 2 * i] = digits[Int(byte >> 4)]
            out[3 + 2 * i] = digits[Int(byte & 0xF)]
        }
        return String(decoding: out, as: UTF8.self)
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
