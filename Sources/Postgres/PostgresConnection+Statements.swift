import CLibPQ

extension PostgresConnection {
    /// Runs one statement with bound parameters and returns its rows.
    ///
    /// - Parameters:
    ///   - sql: the statement, with `$1`, `$2`, ... placeholders.
    ///   - parameters: one value per placeholder; `nil` optionals bind SQL NULL.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> PostgresResult {
        try run(
            blocking: { conn in
                withParameters(parameters) { count, values, lengths, formats in
                    PQexecParams(conn, sql, count, nil, values, lengths, formats, 0)
                }
            },
            send: { conn in
                withParameters(parameters) { count, values, lengths, formats in
                    PQsendQueryParams(conn, sql, count, nil, values, lengths, formats, 0)
                }
            })
    }

    /// Prepares `sql` under `name` on this connection (`PQprepare`).
    public func prepare(name: String, sql: String) throws {
        _ = try run(blocking: { PQprepare($0, name, sql, 0, nil) }, send: { PQsendPrepare($0, name, sql, 0, nil) })
        preparedStatements[sql] = name
    }

    /// The form in which the server sends result values.
    public enum ResultFormat: Int32, Sendable {
        /// Each type's text form, which `PostgresRow.decode` reads (the default).
        case text = 0
        /// Each type's binary form, read with `PostgresRow.rawBytes`, or with
        /// `PostgresRow.decode` for the types that know their layout (integers, booleans,
        /// floats, texts, `bytea`): for `bytea`, the bytes themselves instead of twice as many
        /// hex digits, and no number written out as text by the server and parsed here.
        case binary = 1
    }

    /// Runs a statement prepared with `prepare(name:sql:)`.
    @discardableResult
    public func queryPrepared(
        name: String, _ parameters: [any PostgresEncodable] = [], resultFormat: ResultFormat = .text
    ) throws -> PostgresResult {
        try run(
            blocking: { conn in
                withParameters(parameters) { count, values, lengths, formats in
                    PQexecPrepared(conn, name, count, values, lengths, formats, resultFormat.rawValue)
                }
            },
            send: { conn in
                withParameters(parameters) { count, values, lengths, formats in
                    PQsendQueryPrepared(conn, name, count, values, lengths, formats, resultFormat.rawValue)
                }
            })
    }

    /// Runs `sql` as a prepared statement, preparing it on first use on this connection.
    ///
    /// Hot statements (claim, complete) use this so the server plans them once per connection.
    @discardableResult
    public func queryCached(
        _ sql: String, _ parameters: [any PostgresEncodable] = [], resultFormat: ResultFormat = .text
    ) throws -> PostgresResult {
        let name: String
        if let existing = preparedStatements[sql] {
            name = existing
        } else {
            name = "courier_s\(preparedStatements.count + 1)"
            try prepare(name: name, sql: sql)
        }
        return try queryPrepared(name: name, parameters, resultFormat: resultFormat)
    }

    /// Runs fixed SQL text that may hold several statements (`PQexec`); no parameters.
    ///
    /// For scripts written by the project (migrations), never for values. With several
    /// statements, the first error is thrown (PostgreSQL stops there).
    public func simpleQuery(_ sql: String) throws {
        _ = try run(blocking: { PQexec($0, sql) }, send: { PQsendQuery($0, sql) })
    }
}

/// Lays parameters out as libpq wants them: values, lengths and formats (text 0, binary 1).
func withParameters<T>(
    _ parameters: [any PostgresEncodable],
    _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> T
) -> T {
    if parameters.isEmpty { return body(0, nil, nil, nil) }
    var values: [UnsafePointer<CChar>?] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    var owned: [UnsafeMutableRawPointer] = []
    values.reserveCapacity(parameters.count)
    lengths.reserveCapacity(parameters.count)
    formats.reserveCapacity(parameters.count)
    defer { owned.forEach { $0.deallocate() } }
    for parameter in parameters {
        switch parameter.postgresValue {
        case .null:
            values.append(nil)
            lengths.append(0)
            formats.append(0)
        case .text(let text):
            var text = text
            let count = text.utf8.count
            let memory = UnsafeMutableRawPointer.allocate(byteCount: count + 1, alignment: 1)
            owned.append(memory)
            text.withUTF8 { utf8 in
                if let base = utf8.baseAddress { memory.copyMemory(from: base, byteCount: count) }
            }
            memory.storeBytes(of: 0, toByteOffset: count, as: UInt8.self)
            values.append(UnsafePointer(memory.assumingMemoryBound(to: CChar.self)))
            lengths.append(Int32(count))
            formats.append(0)
        case .bytes(let bytes):
            let memory = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
            owned.append(memory)
            bytes.withUnsafeBytes { raw in
                if let base = raw.baseAddress { memory.copyMemory(from: base, byteCount: bytes.count) }
            }
            values.append(UnsafePointer(memory.assumingMemoryBound(to: CChar.self)))
            lengths.append(Int32(bytes.count))
            formats.append(1)
        }
    }
    return values.withUnsafeBufferPointer { v in
        lengths.withUnsafeBufferPointer { l in
            formats.withUnsafeBufferPointer { f in
                body(Int32(parameters.count), v.baseAddress, l.baseAddress, f.baseAddress)
            }
        }
    }
}
