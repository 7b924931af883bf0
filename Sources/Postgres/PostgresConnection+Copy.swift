import CLibPQ

extension PostgresConnection {
    /// Streams rows into `COPY ... FROM STDIN` and returns the number of rows copied.
    ///
    /// - Parameters:
    ///   - sql: a `COPY table (columns) FROM STDIN` statement.
    ///   - chunks: the data in COPY's text (or the statement's) format, in pieces of any size.
    ///
    /// Runs blocking even with a `queryTimeout` (the deadline does not cover COPY).
    public func copyIn(_ sql: String, chunks: some Sequence<[UInt8]>) throws -> Int {
        let conn = try live()
        // `PQputCopyData` would return 0 ("try again") on a full buffer in non-blocking mode.
        let wasNonBlocking = PQisnonblocking(conn) == 1
        if wasNonBlocking { PQsetnonblocking(conn, 0) }
        defer { if wasNonBlocking { PQsetnonblocking(conn, 1) } }
        let start = PQexec(conn, sql)
        guard PQresultStatus(start) == PGRES_COPY_IN else {
            return try Self.check(start, conn).affectedRows
        }
        PQclear(start)
        var failure: String?
        for chunk in chunks where !chunk.isEmpty {
            let sent = chunk.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { PQputCopyData(conn, $0.baseAddress, Int32($0.count)) }
            }
            if sent != 1 {
                failure = PostgresError.connectionMessage(conn) ?? "COPY data could not be sent"
                break
            }
        }
        guard PQputCopyEnd(conn, failure) == 1 else {
            throw PostgresError(
                kind: .connectionLost, message: PostgresError.connectionMessage(conn) ?? "COPY could not be ended")
        }
        var copied = 0
        var firstError: (any Error)?
        while let result = PQgetResult(conn) {
            do { copied = try Self.check(result, conn).affectedRows } catch { firstError = firstError ?? error }
        }
        if let firstError { throw firstError }
        return copied
    }
}
