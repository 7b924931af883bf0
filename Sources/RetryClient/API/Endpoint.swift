import Foundation

/// One call of an HTTP API, described as a value: what to send and what comes back.
///
/// An endpoint knows its method, a path relative to the ``APIClient``'s base URL, query items,
/// headers, an optional body and the `Decodable` type its 2xx response decodes into. It sends
/// nothing itself: ``APIClient/send(_:)`` does, through the client's transport and interceptors.
///
/// ```swift
/// struct Invoice: Decodable, Sendable { var id: Int; var total: Int }
/// let invoice = Endpoint<Invoice>(method: "GET", path: "invoices/42", query: [URLQueryItem(name: "expand", value: "lines")])
/// let value = try await api.send(invoice)
/// ```
public struct Endpoint<Response: Decodable & Sendable>: Sendable {
    /// How the body is written.
    public enum Body: Sendable {
        /// The value as JSON (`Content-Type: application/json`).
        case json(any Encodable & Sendable)
        /// The value's top-level fields as `application/x-www-form-urlencoded`, in the order the
        /// value encodes them (see ``FormEncoder``); OAuth2 token requests are written this way.
        case form(any Encodable & Sendable)
        /// Bytes as they are, with their content type.
        case raw([UInt8], contentType: String)
    }

    /// The HTTP method, e.g. `"GET"`.
    public var method: String
    /// The path, appended to the client's base URL with exactly one `/` between them; empty
    /// means the base URL itself.
    public var path: String
    /// Query items appended to the URL, percent-encoded; empty for none.
    public var query: [URLQueryItem]
    /// Header fields added to the request (after the client's defaults, so they win).
    public var headers: HeaderFields
    /// The body, or `nil` for none.
    public var body: Body?
    /// The total time allowed for one attempt; `nil` uses the transport's default.
    public var timeout: Duration?

    /// Creates an endpoint.
    ///
    /// - Parameters:
    ///   - method: The HTTP method. Default `"GET"`.
    ///   - path: Relative to the client's base URL. Default: the base URL itself.
    ///   - query: Query items. Default none.
    ///   - headers: Header fields. Default none.
    ///   - body: The body. Default none.
    ///   - timeout: Time per attempt. Default: the transport's.
    ///   - response: The response type, for when inference cannot tell.
    public init(
        method: String = "GET", path: String = "", query: [URLQueryItem] = [], headers: HeaderFields = [:],
        body: Body? = nil, timeout: Duration? = nil, response: Response.Type = Response.self
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// A response type for endpoints whose body does not matter: decoding accepts any body.
public struct EmptyResponse: Decodable, Sendable, Equatable {
    /// Creates an empty response.
    public init() {}
    /// Accepts anything.
    public init(from decoder: any Decoder) throws {}
}
