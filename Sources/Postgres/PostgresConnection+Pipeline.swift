import CLibPQ

extension PostgresConnection {
    /// Runs `statements` in one round trip: sent together and answered together (libpq's
    /// pipeline mode), each as a statement prepared on this connection on first use, as
    /// `queryCached` does. Under a `queryTimeout`, the deadline covers the whole pipeline.
    ///
    /// PostgreSQL runs them in order and skips every one after a failure. That first error is
    /// thrown once all answers are read, so the connection is ready for the next statement.
    /// Inside a transaction block the failure leaves the transaction aborted, as it would one
    /// statement at a time: the caller rolls back.
    ///
    /// - Returns: each statement's result, in order.
    @discardableResult
    public func pipeline(_ statements: [PipelineStatement]) throws -> [PostgresResult] {
        let conn = try live()
        guard !statements.isEmpty else { return [] }
        var names: [String] = []
        names.reserveCapacity(statements.count)
        for statement in statements {
            if let name = preparedStatements[statement.sql] {
                names.append(name)
            } else {
                let name = "courier_s\(preparedStatements.count + 1)"
                try prepare(name: name, sql: statement.sql)
                names.append(name)
            }
        }
        do {
            return try Self.exchangePipeline(
                conn, names: names, statements: statements, timeout: settings.queryTimeout?.seconds ?? .infinity)
        } catch let error as DeadlineExpired {
            close()
            throw PostgresError(kind: .connectionLost, message: error.message)
        } catch {
            // A connection left in pipeline mode (a failed send) would refuse every later
            // statement: drop it, as after a lost connection.
            if let handle, PQpipelineStatus(handle) != PQ_PIPELINE_OFF { close() }
            throw error
        }
    }

    /// `pipeline`'s exchange: enter pipeline mode, queue every statement and a sync, flush,
    /// then read each statement's answer (results, then NULL) until the sync's.
    private static func exchangePipeline(
        _ conn: OpaquePointer, names: [String], statements: [PipelineStatement], timeout: Double
    ) throws -> [PostgresResult] {
        let wasBlocking = PQisnonblocking(conn) == 0
        if wasBlocking { PQsetnonblocking(conn, 1) }
        guard PQenterPipelineMode(conn) == 1 else { throw lost(conn, "the connection could not enter pipeline mode") }
        let deadline = Deadline(seconds: timeout)
        for (name, statement) in zip(names, statements) {
            let sent = withParameters(statement.parameters) { count, values, lengths, formats in
                PQsendQueryPrepared(conn, name, count, values, lengths, formats, statement.resultFormat.rawValue)
            }
            guard sent == 1 else { throw lost(conn, "the statement could not be sent") }
        }
        guard PQpipelineSync(conn) == 1 else { throw lost(conn, "the statement could not be sent") }
        try flush(conn, deadline: deadline)
        var results = [PostgresResult?](repeating: nil, count: statements.count)
        var current = 0
        var firstError: PostgresError?
        reading: while true {
            try awaitResult(conn, deadline: deadline)
            guard let result = PQgetResult(conn) else {
                // The end of one statement's answer.
                if PQstatus(conn) == CONNECTION_BAD { break reading }
                current += 1
                continue
            }
            switch PQresultStatus(result) {
            case PGRES_PIPELINE_SYNC:
                PQclear(result)
                break reading
            case PGRES_PIPELINE_ABORTED:
                // Skipped after an earlier statement's error.
                PQclear(result)
            default:
                do {
                    let checked = try check(result, conn)
                    if current < results.count { results[current] = checked }
                } catch let error as PostgresError {
                    if firstError == nil { firstError = error }
                    if PQstatus(conn) == CONNECTION_BAD { break reading }
                }
            }
        }
        if PQstatus(conn) == CONNECTION_OK {
            PQexitPipelineMode(conn)
            if wasBlocking { PQsetnonblocking(conn, 0) }
        }
        if let firstError { throw firstError }
        let answered = results.compactMap { $0 }
        guard PQstatus(conn) == CONNECTION_OK, answered.count == statements.count else {
            throw lost(conn, "no result from server")
        }
        return answered
    }
}

/// One statement of `PostgresConnection.pipeline(_:)`: its text, bound parameters and the
/// form its result comes in.
public struct PipelineStatement: Sendable {
    /// The statement, with `$1`, `$2`, ... placeholders; one statement, not a script.
    public var sql: String
    /// One value per placeholder.
    public var parameters: [any PostgresEncodable]
    /// The form of the result's values: text (the default) or binary, which
    /// `PostgresRow.decode` reads for the types that know their binary layout.
    public var resultFormat: PostgresConnection.ResultFormat

    /// A statement and its parameters.
    public init(
        _ sql: String, _ parameters: [any PostgresEncodable] = [],
        resultFormat: PostgresConnection.ResultFormat = .text
    ) {
        self.sql = sql
        self.parameters = parameters
        self.resultFormat = resultFormat
    }

    /// `BEGIN`: the pipeline's later statements, and those after it, run in one transaction.
    public static let begin = PipelineStatement("BEGIN")
    /// `COMMIT`.
    public static let commit = PipelineStatement("COMMIT")
}
