import Foundation

/// One bound parameter as it travels to the server: SQL NULL, text, or raw bytes (bytea).
public enum PostgresValue: Sendable, Equatable {
    case null
    case text(String)
    case bytes([UInt8])
}

/// A Swift value that can be sent as a bound parameter.
///
/// Values are always bound (`PQexecParams`), never spliced into SQL text.
public protocol PostgresEncodable: Sendable {
    /// The parameter's wire form.
    var postgresValue: PostgresValue { get }
    /// Appends the value as one element of an array literal (`PostgresArray`). The default
    /// writes `postgresValue` quoted; a type whose text needs no quoting writes itself.
    func appendArrayElement(to bytes: inout [UInt8])
}

extension PostgresEncodable {
    public func appendArrayElement(to bytes: inout [UInt8]) { PostgresArray.append(postgresValue, to: &bytes) }
}

/// A Swift value that can be read from a result column: from PostgreSQL's text format, and
/// from the binary format of the column types whose layout it knows.
public protocol PostgresDecodable {
    /// Decodes the column's text (never called for NULL).
    static func decode(postgresText text: String) -> Self?
    /// Decodes the column's text as the bytes libpq holds (never called for NULL). The default
    /// makes a `String` and calls `decode(postgresText:)`; a type that reads the bytes faster
    /// (bytea's hex, which would otherwise be copied into a `String` first) provides its own.
    static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>) -> Self?
    /// Decodes a value sent in binary form (`ResultFormat.binary`) by a column of type `type`
    /// (its OID; never called for NULL). nil when the type is not one this Swift type reads in
    /// binary, or the bytes are not that type's layout; the default reads no binary value.
    static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> Self?
}

extension PostgresDecodable {
    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>) -> Self? {
        decode(postgresText: String(decoding: bytes, as: UTF8.self))
    }
    public static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> Self? { nil }
}

/// The OIDs of the built-in types whose binary form `PostgresDecodable` types read
/// (`pg_type.oid`, fixed in every PostgreSQL release).
public enum PostgresTypeOID {
    public static let bool: UInt32 = 16
    public static let bytea: UInt32 = 17
    public static let name: UInt32 = 19
    public static let int8: UInt32 = 20
    public static let int2: UInt32 = 21
    public static let int4: UInt32 = 23
    public static let text: UInt32 = 25
    public static let float4: UInt32 = 700
    public static let float8: UInt32 = 701
    public static let bpchar: UInt32 = 1042
    public static let varchar: UInt32 = 1043

    /// Whether a value of `type` is, in binary form, its text's bytes (in the client's encoding, as
    /// in the text form).
    @inlinable
    public static func isText(_ type: UInt32) -> Bool {
        type == text || type == varchar || type == bpchar || type == name
    }
}

/// Integers in binary form: `int2`, `int4` and `int8`, big-endian, two's complement.
@usableFromInline
enum PostgresBinaryInteger {
    /// The value, if `type` is an integer type and `bytes` its width.
    @inlinable
    static func read(_ bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> Int64? {
        let width: Int
        switch type {
        case PostgresTypeOID.int2: width = 2
        case PostgresTypeOID.int4: width = 4
        case PostgresTypeOID.int8: width = 8
        default: return nil
        }
        guard bytes.count == width else { return nil }
        var bits: UInt64 = 0
        for byte in bytes { bits = bits << 8 | UInt64(byte) }
        // Sign-extend from the type's width.
        let shift = UInt64(64 - 8 * width)
        return Int64(bitPattern: bits << shift) >> shift
    }
}

extension String: PostgresEncodable, PostgresDecodable {
    public var postgresValue: PostgresValue { .text(self) }
    public static func decode(postgresText text: String) -> String? { text }
    /// `text`, `varchar`, `bpchar` and `name`: the text's bytes, as in the text format.
    public static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> String? {
        PostgresTypeOID.isText(type) ? String(decoding: bytes, as: UTF8.self) : nil
    }
}

extension Int: PostgresEncodable, PostgresDecodable {
    public var postgresValue: PostgresValue { .text(String(self)) }
    public func appendArrayElement(to bytes: inout [UInt8]) { PostgresArray.appendDigits(Int64(self), to: &bytes) }
    public static func decode(postgresText text: String) -> Int? { Int(text) }
    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>) -> Int? { PostgresInteger.parse(bytes) }
    public static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> Int? {
        PostgresBinaryInteger.read(bytes, type: type).flatMap { Int(exactly: $0) }
    }
}

extension Int64: PostgresEncodable, PostgresDecodable {
    public var postgresValue: PostgresValue { .text(String(self)) }
    public func appendArrayElement(to bytes: inout [UInt8]) { PostgresArray.appendDigits(Int64(self), to: &bytes) }
    public static func decode(postgresText text: String) -> Int64? { Int64(text) }
    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>) -> Int64? { PostgresInteger.parse(bytes) }
    public static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> Int64? {
        PostgresBinaryInteger.read(bytes, type: type)
    }
}

extension Int32: PostgresEncodable, PostgresDecodable {
    public var postgresValue: PostgresValue { .text(String(self)) }
    public func appendArrayElement(to bytes: inout [UInt8]) { PostgresArray.appendDigits(Int64(self), to: &bytes) }
    public static func decode(postgresText text: String) -> Int32? { Int32(text) }
    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>) -> Int32? { PostgresInteger.parse(bytes) }
    /// nil for an `int8` value beyond `Int32`'s range.
    public static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> Int32? {
        PostgresBinaryInteger.read(bytes, type: type).flatMap { Int32(exactly: $0) }
    }
}

extension Int16: PostgresEncodable, PostgresDecodable {
    public var postgresValue: PostgresValue { .text(String(self)) }
    public static func decode(postgresText text: String) -> Int16? { Int16(text) }
    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>) -> Int16? { PostgresInteger.parse(bytes) }
    /// nil for a value beyond `Int16`'s range.
    public static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> Int16? {
        PostgresBinaryInteger.read(bytes, type: type).flatMap { Int16(exactly: $0) }
    }
}

extension Bool: PostgresEncodable, PostgresDecodable {
    public var postgresValue: PostgresValue { .text(self ? "t" : "f") }
    public func appendArrayElement(to bytes: inout [UInt8]) { bytes.append(self ? UInt8(ascii: "t") : UInt8(ascii: "f")) }
    public static func decode(postgresText text: String) -> Bool? {
        switch text {
        case "t", "true": return true
        case "f", "false": return false
        default: return nil
        }
    }
    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>) -> Bool? {
        if bytes.count == 1 {
            if bytes[0] == UInt8(ascii: "t") { return true }
            if bytes[0] == UInt8(ascii: "f") { return false }
            return nil
        }
        return decode(postgresText: String(decoding: bytes, as: UTF8.self))
    }
    /// `bool`: one byte, 1 or 0.
    public static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> Bool? {
        guard type == PostgresTypeOID.bool, bytes.count == 1, bytes[0] <= 1 else { return nil }
        return bytes[0] == 1
    }
}

extension Double: PostgresEncodable, PostgresDecodable {
    public var postgresValue: PostgresValue {
        if isNaN { return .text("NaN") }
        if isInfinite { return .text(self > 0 ? "Infinity" : "-Infinity") }
        return .text(String(self))
    }
    public static func decode(postgresText text: String) -> Double? { Double(text) }
    /// `float8` and `float4`: IEEE 754, big-endian.
    public static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> Double? {
        switch (type, bytes.count) {
        case (PostgresTypeOID.float8, 8):
            return Double(bitPattern: bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        case (PostgresTypeOID.float4, 4):
            return Double(Float(bitPattern: bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }))
        default:
            return nil
        }
    }
}

extension Array: PostgresEncodable where Element == UInt8 {
    public var postgresValue: PostgresValue { .bytes(self) }
}

extension Array: PostgresDecodable where Element == UInt8 {
    /// Decodes bytea's hex text form (`\x0a1b...`).
    public static func decode(postgresText text: String) -> [UInt8]? { PostgresBytea.decodeHex(text) }
    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        PostgresBytea.decodeHex(bytes)
    }
    /// `bytea`: the bytes themselves.
    public static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> [UInt8]? {
        type == PostgresTypeOID.bytea ? Array(bytes) : nil
    }
}

extension Data: PostgresEncodable, PostgresDecodable {
    public var postgresValue: PostgresValue { .bytes([UInt8](self)) }
    public static func decode(postgresText text: String) -> Data? { PostgresBytea.decodeHex(text).map { Data($0) } }
    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>) -> Data? {
        PostgresBytea.decodeHex(bytes).map { Data($0) }
    }
    /// `bytea`: the bytes themselves.
    public static func decode(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) -> Data? {
        type == PostgresTypeOID.bytea ? Data(bytes) : nil
    }
}

extension Date: PostgresEncodable, PostgresDecodable {
    /// Sent as ISO 8601 in UTC with microseconds, which `timestamptz` parses exactly.
    public var postgresValue: PostgresValue { .text(PostgresTimestamp.format(self)) }
    /// Unquoted: the text has no character an array literal would need quoted.
    public func appendArrayElement(to bytes: inout [UInt8]) { bytes.append(contentsOf: PostgresTimestamp.format(self).utf8) }
    public static func decode(postgresText text: String) -> Date? { PostgresTimestamp.parse(text) }
    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        PostgresTimestamp.parse(bytes: bytes)
    }
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public var postgresValue: PostgresValue {
        switch self {
        case .none: return .null
        case .some(let value): return value.postgresValue
        }
    }

    public func appendArrayElement(to bytes: inout [UInt8]) {
        switch self {
        case .none: bytes.append(contentsOf: "NULL".utf8)
        case .some(let value): value.appendArrayElement(to: &bytes)
        }
    }
}

/// A JSON document, sent and read as text (`json`/`jsonb` columns).
public struct PostgresJSON: PostgresEncodable, PostgresDecodable, Sendable, Equatable {
    /// The JSON text.
    public var text: String
    /// Wraps JSON text; it is validated by the server.
    public init(_ text: String) { self.text = text }
    public var postgresValue: PostgresValue { .text(text) }
    public static func decode(postgresText text: String) -> PostgresJSON? { PostgresJSON(text) }
}

/// Integers read from the bytes libpq holds, as `Int(text)` reads them (an optional sign, then
/// decimal digits, nil on anything else or on overflow), without making a `String` first.
enum PostgresInteger {
    static func parse<T: FixedWidthInteger>(_ bytes: UnsafeBufferPointer<UInt8>) -> T? {
        var i = 0
        var negative = false
        if let first = bytes.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
            negative = first == UInt8(ascii: "-")
            i = 1
        }
        guard i < bytes.count else { return nil }
        var value: T = 0
        while i < bytes.count {
            let digit = bytes[i] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (next, overflowB) =
                negative ? times.subtractingReportingOverflow(T(digit)) : times.addingReportingOverflow(T(digit))
            guard !overflowA, !overflowB else { return nil }
            value = next
            i += 1
        }
        return value
    }
}

/// bytea hex decoding.
enum PostgresBytea {
    static func decodeHex(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decodeHex($0) }
    }

    /// Decodes `\x` followed by pairs of hex digits; nil for anything else. Called for every
    /// claimed job's body, so it reads the bytes through a table and writes in place.
    static func decodeHex(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x"), bytes.count % 2 == 0
        else { return nil }
        let count = (bytes.count - 2) / 2
        var valid = true
        let out = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var bad: UInt8 = 0
            for i in 0..<count {
                let high = nibbles[Int(bytes[2 + 2 * i])]
                let low = nibbles[Int(bytes[3 + 2 * i])]
                bad |= (high | low) & 0x10
                buffer[i] = high << 4 | (low & 0x0F)
            }
            valid = bad == 0
            initialized = count
        }
        return valid ? out : nil
    }

    /// Each byte's value as a hex digit; 0x10 for a byte that is not one.
    private static let nibbles: [UInt8] = (0...255).map { byte -> UInt8 in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt8(byte) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt8(byte) - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt8(byte) - UInt8(ascii: "A") + 10
        default: return 0x10
        }
    }
}

/// Text forms of `timestamptz`. Connections set `DateStyle = ISO` and `TimeZone = UTC`, so the
/// server sends `2026-11-22 20:30:00.123456+00`.
public enum PostgresTimestamp {
    /// Microseconds from 1970-01-01 00:00 UTC to `date`, rounded to the microsecond as
    /// ``format(_:)`` rounds it; for a statement that rebuilds the time as `timestamptz 'epoch'
    /// + n * interval '1 microsecond'`, cheaper for the server than parsing text. Dates beyond
    /// ±9 × 10^12 seconds (or not finite) are clamped there, which the server refuses as out of
    /// range.
    public static func microseconds(since1970 date: Date) -> Int64 {
        let (seconds, micros) = secondsAndMicroseconds(of: date)
        let limit: Int64 = 9_000_000_000_000
        guard seconds.magnitude < limit else { return seconds < 0 ? -limit * 1_000_000 : limit * 1_000_000 }
        return seconds * 1_000_000 + micros
    }

    /// Whole seconds since 1970 and the microseconds after them (0–999,999), the fraction
    /// rounded to the microsecond. Computed apart: a year-300000 date has more microseconds
    /// than `Int64` holds. Dates beyond ±10^14 seconds (or not finite) are clamped there.
    static func secondsAndMicroseconds(of date: Date) -> (seconds: Int64, micros: Int64) {
        var interval = date.timeIntervalSince1970
        if !interval.isFinite || abs(interval) > 1e14 { interval = interval < 0 ? -1e14 : 1e14 }
        let whole = interval.rounded(.down)
        var seconds = Int64(whole)
        var micros = Int64(((interval - whole) * 1_000_000).rounded())
        if micros >= 1_000_000 {
            micros -= 1_000_000
            seconds += 1
        }
        return (seconds, micros)
    }

    /// Formats a date as `2026-11-22T20:30:00.123456Z`.
    ///
    /// Total for every `Date`: seconds and microseconds are computed apart (a year-300000 date
    /// has more microseconds than `Int64` holds), and dates beyond ±10^14 seconds (or not
    /// finite) are clamped there, which the server refuses as out of range instead of this
    /// process trapping.
    public static func format(_ date: Date) -> String {
        let (seconds, micros) = secondsAndMicroseconds(of: date)
        var days = seconds / 86_400
        var secOfDay = seconds % 86_400
        if secOfDay < 0 {
            secOfDay += 86_400
            days -= 1
        }
        let (y, m, d) = civil(fromDays: days)
        if (0...9999).contains(y) {
            // The common case, written as 27 bytes: one allocation, no intermediate strings.
            return String(unsafeUninitializedCapacity: 27) { buffer in
                var at = 0
                func put(_ value: Int64, _ width: Int) {
                    var value = value
                    for i in stride(from: width - 1, through: 0, by: -1) {
                        buffer[at + i] = UInt8(ascii: "0") + UInt8(value % 10)
                        value /= 10
                    }
                    at += width
                }
                func mark(_ character: Unicode.Scalar) {
                    buffer[at] = UInt8(ascii: character)
                    at += 1
                }
                put(y, 4); mark("-"); put(m, 2); mark("-"); put(d, 2); mark("T")
                put(secOfDay / 3600, 2); mark(":"); put(secOfDay / 60 % 60, 2); mark(":"); put(secOfDay % 60, 2)
                mark("."); put(micros, 6); mark("Z")
                return at
            }
        }
        func pad(_ v: Int64, _ n: Int) -> String {
            let s = String(v)
            return s.count >= n ? s : String(repeating: "0", count: n - s.count) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secOfDay / 3600, 2)):\(pad(secOfDay / 60 % 60, 2)):"
            + "\(pad(secOfDay % 60, 2)).\(pad(micros, 6))Z"
    }

    /// Parses the ISO text the server sends (`YYYY-MM-DD HH:MM:SS[.ffffff]+HH[:MM[:SS]]`).
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse(bytes: $0) }
    }

    /// `parse(_:)` of the text's UTF-8 bytes, as libpq holds them: no `String` made.
    public static func parse(bytes b: UnsafeBufferPointer<UInt8>) -> Date? {
        var i = 0
        func number(_ count: Int) -> Int64? {
            guard i + count <= b.count else { return nil }
            var v: Int64 = 0
            for k in i..<(i + count) {
                let c = b[k]
                guard c >= 48, c <= 57 else { return nil }
                v = v * 10 + Int64(c - 48)
            }
            i += count
            return v
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect(45), let month = number(2), expect(45), let day = number(2) else {
            return nil
        }
        guard i < b.count, b[i] == 32 || b[i] == 84 else { return nil }
        i += 1
        guard let hour = number(2), expect(58), let minute = number(2), expect(58), let second = number(2) else {
            return nil
        }
        var fraction = 0.0
        if i < b.count, b[i] == 46 {
            i += 1
            var scale = 0.1
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                fraction += Double(b[i] - 48) * scale
                scale /= 10
                i += 1
            }
        }
        var offset: Int64 = 0
        if i < b.count {
            if b[i] == 90 {
                i += 1
            } else {
                guard b[i] == 43 || b[i] == 45 else { return nil }
                let sign: Int64 = b[i] == 45 ? -1 : 1
                i += 1
                guard let oh = number(2) else { return nil }
                var om: Int64 = 0
                var os: Int64 = 0
                if expect(58) { om = number(2) ?? 0 }
                if expect(58) { os = number(2) ?? 0 }
                offset = sign * (oh * 3600 + om * 60 + os)
            }
        }
        guard i == b.count else { return nil }
        let days = days(fromCivil: year, month, day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    // Howard Hinnant's civil-from-days algorithms (proleptic Gregorian calendar).
    static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }
}
