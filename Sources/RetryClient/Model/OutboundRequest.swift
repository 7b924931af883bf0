/// An HTTP request about to be sent: the value adapters receive and return.
///
/// It is a plain value so an adapter can change a copy (add a header, sign the body) without
/// affecting the caller's original, which is adapted afresh on every attempt.
public struct OutboundRequest: Sendable, Equatable {
    /// The HTTP method, e.g. `"POST"`. Compared case-insensitively by retry policies.
    public var method: String
    /// The absolute URL, e.g. `"https://example.com/hooks"`.
    public var url: String
    /// The header fields, in order.
    public var headers: HeaderFields
    /// The body bytes, or `nil` for no body.
    public var body: [UInt8]?
    /// The total time allowed for this request; `nil` uses the transport's default
    /// (30 s for ``AsyncHTTPClientTransport``).
    public var timeout: Duration?
    /// The IP address to connect to instead of resolving the URL's host, or `nil` to resolve.
    ///
    /// Set it to an address that was resolved and checked once, so a second, different DNS
    /// answer (rebinding) cannot redirect the connection. The `Host` header, TLS SNI and
    /// certificate verification still use the URL's host.
    public var connectAddress: String?

    /// The URL as ``validateRemembering(limits:)`` last took it apart, with the answer: a
    /// delivery is validated by its deliverer and again by the transport, and taking the URL
    /// apart (Foundation's parse included) is most of that cost. Used only while `url` is
    /// still the same text; not part of the request's equality.
    var checkedURL: (url: String, target: (scheme: String, host: String, port: Int))?

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - method: The HTTP method. Defaults to `"POST"`, the method of webhooks.
    ///   - url: The absolute URL.
    ///   - headers: Header fields. Defaults to none.
    ///   - body: Body bytes. Defaults to none.
    ///   - timeout: Total time for the request. Defaults to the transport's default.
    ///   - connectAddress: A checked IP address to connect to. Defaults to resolving the host.
    public init(
        method: String = "POST",
        url: String,
        headers: HeaderFields = [:],
        body: [UInt8]? = nil,
        timeout: Duration? = nil,
        connectAddress: String? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.connectAddress = connectAddress
    }
}

extension OutboundRequest {
    /// Equal when every field a receiver could see or a transport uses is equal.
    public static func == (a: OutboundRequest, b: OutboundRequest) -> Bool {
        a.method == b.method && a.url == b.url && a.headers == b.headers && a.body == b.body
            && a.timeout == b.timeout && a.connectAddress == b.connectAddress
    }
}
