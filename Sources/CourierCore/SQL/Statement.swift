import Postgres

/// One SQL statement: its text with `$n` placeholders, and how a value of its named, typed
/// parameters becomes the `$n` list.
///
/// The numbering lives here, beside the text, never at the call site: a caller writes
/// `connection.run(DestinationStatements.disable, .init(host: host, reason: reason))`, and
/// adding a parameter is a change to one file the compiler checks everywhere.
public struct Statement<Parameters>: Sendable {
    /// When PostgreSQL plans a statement.
    public enum Planning: Sendable {
        /// With the values of each call (an unnamed statement): for statements whose best plan
        /// depends on which optional filters are set, run once in a while.
        case perCall
        /// Once per connection (a named prepared statement, `PostgresConnection.queryCached`):
        /// for the statements a worker runs thousands of times, whose plan does not depend on
        /// the values.
        case prepared
    }

    /// The SQL text.
    public let sql: String
    /// When it is planned.
    public let planning: Planning
    private let bind: @Sendable (Parameters) -> [any PostgresEncodable]

    /// A statement whose `$1 ... $n` are `bind(parameters)` in that order.
    public init(
        _ sql: String, planning: Planning = .perCall, bind: @escaping @Sendable (Parameters) -> [any PostgresEncodable]
    ) {
        self.sql = sql
        self.planning = planning
        self.bind = bind
    }

    /// The positional values for `parameters`.
    public func arguments(_ parameters: Parameters) -> [any PostgresEncodable] { bind(parameters) }

    /// This statement with `parameters`, as one step of `PostgresConnection.pipeline(_:)`
    /// (where every statement is prepared).
    public func pipelined(
        _ parameters: Parameters, resultFormat: PostgresConnection.ResultFormat = .text
    ) -> PipelineStatement {
        PipelineStatement(sql, bind(parameters), resultFormat: resultFormat)
    }
}

extension Statement where Parameters == Void {
    /// A statement without parameters.
    public init(_ sql: String, planning: Planning = .perCall) {
        self.init(sql, planning: planning) { _ in [] }
    }

    /// This statement as one step of a pipeline.
    public var pipelined: PipelineStatement { pipelined(()) }
}

extension PostgresConnection {
    /// Runs `statement` with `parameters`, planned as the statement says.
    @discardableResult
    public func run<Parameters>(_ statement: Statement<Parameters>, _ parameters: Parameters) throws -> PostgresResult {
        switch statement.planning {
        case .perCall: try query(statement.sql, statement.arguments(parameters))
        case .prepared: try queryCached(statement.sql, statement.arguments(parameters))
        }
    }

    /// Runs prepared `statement` with the values sent in binary form, for `PostgresRow.rawBytes`
    /// and for `PostgresRow.decode` of the types that read binary values (a `bytea` then
    /// travels as its bytes, not as hex).
    public func runBinary<Parameters>(_ statement: Statement<Parameters>, _ parameters: Parameters) throws
        -> PostgresResult
    {
        try queryCached(statement.sql, statement.arguments(parameters), resultFormat: .binary)
    }

    /// Runs a statement without parameters.
    @discardableResult
    public func run(_ statement: Statement<Void>) throws -> PostgresResult {
        try run(statement, ())
    }
}
