/// A fixed-width value that can be one element of a ``PostgresBinaryArray``: its type's OID and
/// its binary form (network byte order).
public protocol PostgresBinaryArrayElement: Sendable {
    /// The OID of the element type (`int8` 20, `int4` 23, `float8` 701, `bool` 16).
    static var postgresElementOID: UInt32 { get }
    /// Bytes of the binary form.
    static var postgresElementSize: Int { get }
    /// Appends the binary form.
    func appendBinary(to bytes: inout [UInt8])
}

extension Int64: PostgresBinaryArrayElement {
    public static var postgresElementOID: UInt32 { PostgresTypeOID.int8 }
    public static var postgresElementSize: Int { 8 }
    public func appendBinary(to bytes: inout [UInt8]) { PostgresBinaryArray.append(UInt64(bitPattern: self), to: &bytes) }
}

extension Int32: PostgresBinaryArrayElement {
    public static var postgresElementOID: UInt32 { PostgresTypeOID.int4 }
    public static var postgresElementSize: Int { 4 }
    public func appendBinary(to bytes: inout [UInt8]) { PostgresBinaryArray.append(UInt32(bitPattern: self), to: &bytes) }
}

extension Double: PostgresBinaryArrayElement {
    public static var postgresElementOID: UInt32 { PostgresTypeOID.float8 }
    public static var postgresElementSize: Int { 8 }
    public func appendBinary(to bytes: inout [UInt8]) { PostgresBinaryArray.append(bitPattern, to: &bytes) }
}

extension Bool: PostgresBinaryArrayElement {
    public static var postgresElementOID: UInt32 { PostgresTypeOID.bool }
    public static var postgresElementSize: Int { 1 }
    public func appendBinary(to bytes: inout [UInt8]) { bytes.append(self ? 1 : 0) }
}

/// A one-dimensional array parameter of `bigint`, `integer`, `float8` or `boolean`, sent in
/// PostgreSQL's binary array form: the server reads each element's fixed-width bytes
/// (`array_recv`) instead of parsing the array's text and every number in it (`array_in`,
/// 2.6 % of the instructions of a worker's server process when its outcome batches sent every
/// array as text).
///
/// The statement must give the parameter the matching array type (`$1::bigint[]`,
/// `$2::int[]`, `$3::float8[]`, `$4::boolean[]`): the server refuses an array whose element
/// type is not the parameter's. Swift `Int` values go as `Int32` (`integer`) or `Int64`
/// (`bigint`), whichever the statement expects.
public struct PostgresBinaryArray: PostgresEncodable, Sendable {
    private let bytes: [UInt8]

    /// Wraps elements; `nil` elements become SQL NULL.
    @inlinable
    public init<Element: PostgresBinaryArrayElement>(_ elements: [Element?]) {
        self.init(oid: Element.postgresElementOID, count: elements.count,
                  hasNulls: elements.contains { $0 == nil }, elementSize: Element.postgresElementSize) { bytes in
            for element in elements {
                if let element {
                    Self.append(UInt32(Element.postgresElementSize), to: &bytes)
                    element.appendBinary(to: &bytes)
                } else {
                    Self.append(UInt32(bitPattern: -1), to: &bytes)
                }
            }
        }
    }

    /// Wraps elements without NULLs.
    @inlinable
    public init<Element: PostgresBinaryArrayElement>(_ elements: [Element]) {
        self.init(oid: Element.postgresElementOID, count: elements.count, hasNulls: false,
                  elementSize: Element.postgresElementSize) { bytes in
            for element in elements {
                Self.append(UInt32(Element.postgresElementSize), to: &bytes)
                element.appendBinary(to: &bytes)
            }
        }
    }

    /// The header (dimensions, the NULL flag, the element type, the one dimension's length and
    /// lower bound 1), then each element as its length and bytes (length -1: NULL). An empty
    /// array has no dimension.
    @usableFromInline
    init(oid: UInt32, count: Int, hasNulls: Bool, elementSize: Int, elements: (inout [UInt8]) -> Void) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(20 + count * (4 + elementSize))
        Self.append(UInt32(count == 0 ? 0 : 1), to: &bytes)
        Self.append(UInt32(hasNulls ? 1 : 0), to: &bytes)
        Self.append(oid, to: &bytes)
        if count > 0 {
            Self.append(UInt32(count), to: &bytes)
            Self.append(UInt32(1), to: &bytes)
        }
        elements(&bytes)
        self.bytes = bytes
    }

    public var postgresValue: PostgresValue { .bytes(bytes) }

    /// The array's binary form, as sent.
    public var binary: [UInt8] { bytes }

    @usableFromInline
    static func append(_ value: UInt32, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    @usableFromInline
    static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }
}
