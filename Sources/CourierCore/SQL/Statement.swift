import Postgres

/// One SQL statement: its text with `$n` placeholders, and how a value of its named, typed
/// parameters becomes the `$n` list.
///
/// The numbering lives here, beside the text, never at the call site: a caller writes
/// `connection.run(DestinationStatements.disable, .init(host: host, reason: reason))`, and
/// adding a parameter is a change to one file the compiler checks everywhere.
public struct Statement<Parameters>: Sendable {
    /// The SQL text, run as one prepared statement.
    public let sql: String
    private let bind: @Sendable (Parameters) -> [any PostgresEncodable]

    /// A statement whose `$1 ... $n` are `bind(parameters)` in that order.
    public init(_ sql: String, bind: @escaping @Sendable (Parameters) -> [any PostgresEncodable]) {
        self.sql = sql
        self.bind = bind
    }

    /// The positional values for `parameters`.
    public func arguments(_ parameters: Parameters) -> [any PostgresEncodable] { bind(parameters) }
}

extension Statement where Parameters == Void {
    /// A statement without parameters.
    public init(_ sql: String) {
        self.init(sql) { _ in [] }
    }
}

extension PostgresConnection {
    /// Runs `statement` with `parameters`, prepared once per connection.
    @discardableResult
    public func run<Parameters>(_ statement: Statement<Parameters>, _ parameters: Parameters) throws -> PostgresResult {
        try queryCached(statement.sql, statement.arguments(parameters))
    }

    /// Runs a statement without parameters, prepared once per connection.
    @discardableResult
    public func run(_ statement: Statement<Void>) throws -> PostgresResult {
        try queryCached(statement.sql, [])
    }
}
