import CLibPQ

/// An error from PostgreSQL or from this layer, with the server's diagnostics when there are any.
///
/// `sqlState` is the five-character SQLSTATE code (`23505` unique violation, `P0001` raised
/// exception, `42601` syntax error, ...). Messages never contain the connection password.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, coarsely: lets callers decide whether to reconnect.
    public enum Kind: String, Sendable {
        /// The connection could not be opened.
        case connectionFailed
        /// The connection broke (server restart, terminated backend, network).
        case connectionLost
        /// The server rejected a statement.
        case server
        /// A value could not be decoded into the requested Swift type.
        case decoding
        /// This layer was used wrongly (bad identifier, closed connection).
        case usage
    }

    /// The coarse kind of the error.
    public var kind: Kind
    /// The SQLSTATE code, when the server sent one.
    public var sqlState: String?
    /// The primary message.
    public var message: String
    /// The server's DETAIL, if any.
    public var detail: String?
    /// The server's HINT, if any.
    public var hint: String?

    /// Creates an error; used by this layer and by tests.
    public init(kind: Kind, sqlState: String? = nil, message: String, detail: String? = nil, hint: String? = nil) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
    }

    /// True when the connection is unusable and should be replaced (a broken socket, a terminated
    /// backend, an admin shutdown).
    public var isConnectionError: Bool {
        if kind == .connectionLost || kind == .connectionFailed { return true }
        guard let state = sqlState else { return false }
        // Class 08: connection exception; 57P01..57P03: admin/crash shutdown, cannot connect now.
        return state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03"
    }

    public var description: String {
        var text = message
        if let sqlState { text = "\(text) (SQLSTATE \(sqlState))" }
        if let detail, !detail.isEmpty { text += "; detail: \(detail)" }
        if let hint, !hint.isEmpty { text += "; hint: \(hint)" }
        return text
    }

    /// Reads the diagnostics of a failed result.
    static func from(result: OpaquePointer?, connection: OpaquePointer?) -> PostgresError {
        func field(_ code: Character) -> String? {
            guard let result, let value = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
            return String(cString: value)
        }
        let sqlState = field("C")
        let message = field("M") ?? connectionMessage(connection) ?? "unknown PostgreSQL error"
        let lost = connection.map { PQstatus($0) == CONNECTION_BAD } ?? false
        return PostgresError(
            kind: lost ? .connectionLost : .server,
            sqlState: sqlState,
            message: message,
            detail: field("D"),
            hint: field("H")
        )
    }

    /// libpq's last message for a connection, trimmed, or nil when empty.
    static func connectionMessage(_ connection: OpaquePointer?) -> String? {
        guard let connection, let raw = PQerrorMessage(connection) else { return nil }
        // libpq's messages span lines ("...failed: Connection refused\n\tIs the server running");
        // errors here are one line.
        let text = String(cString: raw).split(whereSeparator: { $0.isNewline || $0 == "\t" })
            .map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }.joined(separator: " ")
        return text.isEmpty ? nil : text
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
