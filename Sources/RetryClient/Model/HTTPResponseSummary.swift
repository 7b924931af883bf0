/// What was kept of an HTTP response: status, headers and a bounded excerpt of the body.
///
/// The body is never kept whole: a receiver could answer with gigabytes, and a delivery
/// record only needs enough to explain a failure.
public struct HTTPResponseSummary: Sendable, Equatable {
    /// The status code, e.g. `200`.
    public var status: Int
    /// The reason phrase, e.g. `"OK"`; may be empty.
    public var reason: String
    /// The response header fields, in order.
    public var headers: HeaderFields
    /// The first bytes of the body, at most the transport's excerpt limit.
    public var bodyExcerpt: [UInt8]
    /// Whether the body was longer than ``bodyExcerpt`` and the rest was not read.
    public var bodyTruncated: Bool

    /// Creates a summary.
    public init(
        status: Int,
        reason: String = "",
        headers: HeaderFields = [:],
        bodyExcerpt: [UInt8] = [],
        bodyTruncated: Bool = false
    ) {
        self.status = status
        self.reason = reason
        self.headers = headers
        self.bodyExcerpt = bodyExcerpt
        self.bodyTruncated = bodyTruncated
    }

    /// The first value of the header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? { headers.first(name) }

    /// Whether the status is 2xx, the only kind of success.
    public var isSuccess: Bool { (200...299).contains(status) }
}

extension HTTPResponseSummary: CustomStringConvertible {
    /// `"HTTP 503 Service Unavailable"`.
    public var description: String {
        reason.isEmpty ? "HTTP \(status)" : "HTTP \(status) \(reason)"
    }
}
