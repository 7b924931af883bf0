import CLibPQ

/// The rows of one executed statement. Owns its `PGresult` and frees it exactly once.
///
/// A result is immutable once received, so it may be read from any thread.
public final class PostgresResult: @unchecked Sendable {
    private let handle: OpaquePointer
    /// Column names in order.
    public let columns: [String]
    /// Number of rows returned.
    public let rowCount: Int
    /// Per column, whether its values came in binary form (`ResultFormat.binary`).
    @usableFromInline
    let binaryColumns: [Bool]
    /// Per column, the type's OID (`PQftype`): what a binary value's bytes mean.
    @usableFromInline
    let columnTypes: [UInt32]

    init(handle: OpaquePointer) {
        self.handle = handle
        let count = Int(PQnfields(handle))
        columns = (0..<count).map { String(cString: PQfname(handle, Int32($0))) }
        binaryColumns = (0..<count).map { PQfformat(handle, Int32($0)) == 1 }
        columnTypes = (0..<count).map { UInt32(PQftype(handle, Int32($0))) }
        rowCount = Int(PQntuples(handle))
    }

    deinit { PQclear(handle) }

    /// Rows affected by an INSERT/UPDATE/DELETE (the command tag's count), or 0.
    public var affectedRows: Int {
        guard let raw = PQcmdTuples(handle) else { return 0 }
        return Int(String(cString: raw)) ?? 0
    }

    /// All rows, in order.
    public var rows: [PostgresRow] { (0..<rowCount).map { PostgresRow(result: self, index: $0) } }

    /// The row at `index`.
    public subscript(index: Int) -> PostgresRow { PostgresRow(result: self, index: index) }

    /// The index of the column named `name`.
    public func columnIndex(_ name: String) -> Int? { columns.firstIndex(of: name) }

    func isNull(row: Int, column: Int) -> Bool { PQgetisnull(handle, Int32(row), Int32(column)) == 1 }

    /// The value's bytes as libpq holds them, valid while this result lives; nil for NULL.
    @usableFromInline
    func bytes(row: Int, column: Int) -> UnsafeBufferPointer<UInt8>? {
        guard !isNull(row: row, column: column), let value = PQgetvalue(handle, Int32(row), Int32(column)) else {
            return nil
        }
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        // libpq's `char` bytes read as `UInt8`, their unsigned counterpart (a related type).
        return UnsafeBufferPointer(start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: length)
    }
}

/// One row of a `PostgresResult`, read by column index or name with typed decoding.
public struct PostgresRow: Sendable {
    /// The result this row belongs to.
    public let result: PostgresResult
    /// The row's position in the result.
    public let index: Int

    /// True when the column is SQL NULL.
    public func isNull(_ column: Int) -> Bool { result.isNull(row: index, column: column) }

    /// Decodes a non-null column; throws on NULL or on a value that is not a `T`. A column
    /// sent in binary form (`ResultFormat.binary`) is read by its type's binary layout, and
    /// only as a type that reads that layout (`decode(postgresBinary:type:)`). Inlinable,
    /// so each caller gets a copy specialized to `T`: unspecialized, instantiating generic
    /// metadata cost more than decoding (perf, the worker reading a claim of 100 rows).
    @inlinable
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T.Type = T.self) throws -> T {
        guard column >= 0, column < result.columns.count else { throw failure(column, T.self) }
        // The row holds the result, so the bytes stay valid for the call.
        guard let bytes = result.bytes(row: index, column: column) else { throw failure(column, T.self) }
        let value =
            result.binaryColumns[column]
            ? T.decode(postgresBinary: bytes, type: result.columnTypes[column])
            : T.decode(postgresBytes: bytes)
        guard let value else { throw failure(column, T.self) }
        return value
    }

    /// Decodes a nullable column: nil for NULL; throws on a value that is not a `T`.
    @inlinable
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T?.Type = T?.self) throws -> T? {
        if isNull(column) { return nil }
        return try decode(column, as: T.self)
    }

    /// Why column `column` could not be read as `type`: out of range, NULL, or not a `type`.
    @usableFromInline
    func failure(_ column: Int, _ type: Any.Type) -> PostgresError {
        guard column >= 0, column < result.columns.count else {
            return PostgresError(kind: .usage, message: "column \(column) out of range (\(result.columns.count) columns)")
        }
        guard let bytes = result.bytes(row: index, column: column) else {
            return PostgresError(
                kind: .decoding, message: "column \"\(result.columns[column])\" is NULL where \(type) was expected")
        }
        if result.binaryColumns[column] {
            // A binary value's bytes are no text to quote: say what the server sent instead.
            return PostgresError(
                kind: .decoding,
                message: "column \"\(result.columns[column])\" (binary, type oid \(result.columnTypes[column]), "
                    + "\(bytes.count) bytes) is not a \(type)")
        }
        let text = String(decoding: bytes, as: UTF8.self)
        return PostgresError(
            kind: .decoding,
            message: "column \"\(result.columns[column])\" value \(text.prefix(60).debugDescription) is not a \(type)")
    }

    /// The value's bytes exactly as the server sent them, copied once; nil for NULL. With
    /// `ResultFormat.binary` a `bytea` value is its bytes.
    public func rawBytes(_ column: Int) -> [UInt8]? {
        guard column >= 0, column < result.columns.count else { return nil }
        return result.bytes(row: index, column: column).map { Array($0) }
    }

    /// Decodes a non-null column by name.
    public func decode<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        try decode(try column(named: name), as: T.self)
    }

    /// Decodes a nullable column by name.
    public func decode<T: PostgresDecodable>(_ name: String, as type: T?.Type = T?.self) throws -> T? {
        try decode(try column(named: name), as: T?.self)
    }

    private func column(named name: String) throws -> Int {
        guard let column = result.columnIndex(name) else {
            throw PostgresError(kind: .usage, message: "no column named \"\(name)\" in result")
        }
        return column
    }
}
