import PostgresNIO

/// Why Courier refused a call, with the database's own words: the same checks and messages
/// as the SQL functions, as a Swift error.
public struct CourierClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of refusal.
    public enum Kind: Sendable, Equatable {
        /// A value was refused (SQLSTATE 22023): `message` names the field and the rule.
        case invalidInput
        /// The database has no Courier schema, or an older one: run `courier migrate`.
        case schemaMissing
        /// The role may not call this (SQLSTATE 42501): grant it `courier_producer`.
        case permissionDenied
        /// The database answered something this client did not expect.
        case unexpected
    }

    /// What kind of refusal.
    public var kind: Kind
    /// One line: what was wrong, and for the last three kinds what to do next.
    public var message: String

    /// An error of `kind`.
    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    /// The Courier refusal a server error stands for; nil for any other error (a lost
    /// connection, a constraint of the caller's own tables), which the caller gets unchanged.
    init?(_ error: PSQLError) {
        guard error.code == .server, let state = error.serverInfo?[.sqlState] else { return nil }
        let text = error.serverInfo?[.message] ?? "the database refused the call"
        switch state {
        case "22023", "22P02", "22003", "22007", "22008":
            self.init(kind: .invalidInput, message: text)
        case "3F000", "42883", "42P01":
            self.init(
                kind: .schemaMissing,
                message: "\(text): the database has no Courier schema or an older one; run `courier migrate`")
        case "42501":
            self.init(kind: .permissionDenied, message: "\(text): grant the role courier_producer")
        default:
            return nil
        }
    }

    public var description: String { message }
}
