import CourierCore
import Postgres

/// Text a page may show. Whatever came from the database or a form becomes `Shown` only
/// through `Redaction` or `BodyRedaction`, here and nowhere else, so a view model whose fields
/// are `Shown` cannot carry a stored secret to a page by forgetting a call.
///
/// The console's own words are string literals (only literals: `StaticString`); interpolation
/// takes other `Shown` values, numbers, or stored text by way of a labelled redaction:
/// `"created in queue \(text: queue)"`. Mustache renders it through `description` (escaped
/// like any `{{value}}`).
struct Shown: Sendable, Equatable, CustomStringConvertible, ExpressibleByStringInterpolation {
    /// The text, redacted. Named so no template key inside a section over it finds it.
    let string: String

    var description: String { string }

    private init(redacted: String) { string = redacted }

    /// The console's own words: a literal in the source (a `StaticString`, so no value read at
    /// run time can pass for one).
    init(stringLiteral value: StaticString) { string = value.description }

    /// Words with redacted pieces in them.
    init(stringInterpolation: Interpolation) { string = stringInterpolation.string }

    /// A name or word (queue, method, worker, host): control characters and terminal escapes go.
    static func text(_ stored: String) -> Shown { Shown(redacted: Redaction.text(stored)) }

    /// A URL without its credentials or secret query values.
    static func url(_ stored: String) -> Shown { Shown(redacted: Redaction.url(stored)) }

    /// Free text (an error, a header value, a reason): URLs with credentials and `name=secret`
    /// pairs inside it are hidden too; cut to `limit` characters when one is given.
    static func message(_ stored: String, limit: Int? = nil) -> Shown {
        let text = Redaction.message(stored)
        guard let limit, text.count > limit else { return Shown(redacted: text) }
        return Shown(redacted: String(text.prefix(limit - 1)) + "…")
    }

    /// A stored body or response excerpt as `BodyRedaction` shows it, and whether it was cut.
    static func body(_ stored: [UInt8], limit: Int = 8_000) -> (shown: Shown, clipped: Bool) {
        let shown = BodyRedaction.show(stored, limit: limit)
        return (Shown(redacted: shown.text), shown.clipped)
    }

    /// What a failure may say on a page (and in the log): a database error's message, or the
    /// error, redacted.
    static func failure(_ error: any Error) -> Shown {
        if let error = error as? PostgresError { return Shown(redacted: "The database refused: " + Redaction.message(error.message)) }
        return Shown(redacted: Redaction.message(String(describing: error)))
    }

    /// Text `JobListQuery.description` wrote from redacted pieces: the filter in words, which
    /// the audit row stores as it is shown.
    static func filterDescription(_ query: JobListQuery) -> Shown { Shown(redacted: query.description) }

    /// Builds interpolated `Shown` text.
    struct Interpolation: StringInterpolationProtocol {
        fileprivate var string = ""

        init(literalCapacity: Int, interpolationCount: Int) { string.reserveCapacity(literalCapacity) }

        mutating func appendLiteral(_ literal: StaticString) { string += literal.description }

        mutating func appendInterpolation(_ shown: Shown) { string += shown.string }

        mutating func appendInterpolation<Number: BinaryInteger>(_ number: Number) { string += String(number) }

        mutating func appendInterpolation(text stored: String) { string += Redaction.text(stored) }

        mutating func appendInterpolation(message stored: String) { string += Redaction.message(stored) }
    }
}
