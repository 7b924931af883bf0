import Foundation

/// Writes an `Encodable` value's top-level fields as `application/x-www-form-urlencoded`
/// (`a=1&b=two+words`), in the order the value encodes them.
///
/// Only flat values are accepted: strings, numbers, booleans (`true`/`false`), and values that
/// encode as a single one of those (a `URL`, an enum with a raw value). `nil` optionals are
/// left out. A nested object or array throws ``FormEncodingError``, since form encoding has no
/// one agreed way to write them.
public struct FormEncoder: Sendable {
    /// Creates an encoder.
    public init() {}

    /// The encoded body as bytes.
    public func encode(_ value: some Encodable) throws -> [UInt8] {
        Array(try encodeToString(value).utf8)
    }

    /// The encoded body as text.
    public func encodeToString(_ value: some Encodable) throws -> String {
        let storage = FormStorage()
        try value.encode(to: FormFieldEncoder(storage: storage, codingPath: []))
        return Self.serialize(storage.fields)
    }

    /// `name=value` pairs joined by `&`, each side percent-encoded (space as `+`).
    public static func serialize(_ fields: [(String, String)]) -> String {
        fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    /// Percent-encodes everything but the unreserved characters of RFC 3986; space becomes `+`.
    static func escape(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "):
                out += "+"
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }
}

/// Why a value cannot be form-encoded.
public struct FormEncodingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The field path and the problem.
    public var message: String
    /// The message.
    public var description: String { "form encoding: \(message)" }
}

private final class FormStorage {
    var fields: [(String, String)] = []
}

private struct FormFieldEncoder: Encoder {
    let storage: FormStorage
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(FormKeyedContainer<Key>(storage: storage, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        FailingUnkeyedContainer(codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        FormSingleValue(storage: storage, codingPath: codingPath)
    }
}

/// Top level: each key is one field. Below the top level (a nested value) only a single value
/// is allowed, written under the top-level key.
private struct FormKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let storage: FormStorage
    var codingPath: [any CodingKey]

    private func fail(_ key: Key, _ problem: String) -> FormEncodingError {
        FormEncodingError(message: "\((codingPath + [key]).map(\.stringValue).joined(separator: ".")): \(problem)")
    }

    private func add(_ key: Key, _ value: String) throws {
        guard codingPath.isEmpty else { throw fail(key, "nested objects cannot be form-encoded") }
        storage.fields.append((key.stringValue, value))
    }

    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode(_ value: Bool, forKey key: Key) throws { try add(key, value ? "true" : "false") }
    mutating func encode(_ value: String, forKey key: Key) throws { try add(key, value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try add(key, "\(value)") }
    mutating func encode(_ value: Float, forKey key: Key) throws { try add(key, "\(value)") }
    mutating func encode(_ value: Int, forKey key: Key) throws { try add(key, String(value)) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try add(key, String(value)) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try add(key, String(value)) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try add(key, String(value)) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try add(key, String(value)) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try add(key, String(value)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try add(key, String(value)) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try add(key, String(value)) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try add(key, String(value)) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try add(key, String(value)) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        if let url = value as? URL { return try add(key, url.absoluteString) }
        guard codingPath.isEmpty else { throw fail(key, "nested objects cannot be form-encoded") }
        // A value that encodes as one single value (a raw-value enum, a wrapper) is that value.
        let single = FormStorage()
        try value.encode(to: SingleOnlyEncoder(storage: single, codingPath: codingPath + [key]))
        guard single.fields.count == 1 else { throw fail(key, "not a single value") }
        storage.fields.append((key.stringValue, single.fields[0].1))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(FormKeyedContainer<NestedKey>(storage: FormStorage(), codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        FailingUnkeyedContainer(codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { FormFieldEncoder(storage: FormStorage(), codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        FormFieldEncoder(storage: FormStorage(), codingPath: codingPath + [key])
    }
}

/// The encoder a field's value sees: it may write one single value, nothing else.
private struct SingleOnlyEncoder: Encoder {
    let storage: FormStorage
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        // Anything written here fails: its coding path is not empty.
        KeyedEncodingContainer(FormKeyedContainer<Key>(storage: storage, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer { FailingUnkeyedContainer(codingPath: codingPath) }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        FormSingleValue(storage: storage, codingPath: codingPath)
    }
}

private struct FormSingleValue: SingleValueEncodingContainer {
    let storage: FormStorage
    var codingPath: [any CodingKey]

    private func add(_ value: String) throws {
        guard let key = codingPath.last else {
            throw FormEncodingError(message: "the top-level value must be an object with fields")
        }
        storage.fields.append((key.stringValue, value))
    }

    mutating func encodeNil() throws {}
    mutating func encode(_ value: Bool) throws { try add(value ? "true" : "false") }
    mutating func encode(_ value: String) throws { try add(value) }
    mutating func encode(_ value: Double) throws { try add("\(value)") }
    mutating func encode(_ value: Float) throws { try add("\(value)") }
    mutating func encode(_ value: Int) throws { try add(String(value)) }
    mutating func encode(_ value: Int8) throws { try add(String(value)) }
    mutating func encode(_ value: Int16) throws { try add(String(value)) }
    mutating func encode(_ value: Int32) throws { try add(String(value)) }
    mutating func encode(_ value: Int64) throws { try add(String(value)) }
    mutating func encode(_ value: UInt) throws { try add(String(value)) }
    mutating func encode(_ value: UInt8) throws { try add(String(value)) }
    mutating func encode(_ value: UInt16) throws { try add(String(value)) }
    mutating func encode(_ value: UInt32) throws { try add(String(value)) }
    mutating func encode(_ value: UInt64) throws { try add(String(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try value.encode(to: SingleOnlyEncoder(storage: storage, codingPath: codingPath))
    }
}

/// Arrays cannot be form-encoded: every write throws.
private struct FailingUnkeyedContainer: UnkeyedEncodingContainer {
    var codingPath: [any CodingKey]
    var count: Int { 0 }

    private func fail() -> FormEncodingError {
        FormEncodingError(message: "\(codingPath.map(\.stringValue).joined(separator: ".")): arrays cannot be form-encoded")
    }

    mutating func encodeNil() throws { throw fail() }
    mutating func encode<T: Encodable>(_ value: T) throws { throw fail() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(FormKeyedContainer<NestedKey>(storage: FormStorage(), codingPath: codingPath + [Index()]))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { FormFieldEncoder(storage: FormStorage(), codingPath: codingPath) }

    private struct Index: CodingKey {
        var stringValue: String { "[]" }
        var intValue: Int? { nil }
        init() {}
        init?(stringValue: String) { nil }
        init?(intValue: Int) { nil }
    }
}
