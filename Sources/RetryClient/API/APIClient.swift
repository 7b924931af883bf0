import Foundation
import Logging

/// A typed client for one HTTP API: sends ``Endpoint`` values through a ``RetryingClient``
/// (so the same transport, adapters and retriers as any other request) and decodes 2xx bodies.
///
/// ```swift
/// let api = APIClient(
///     baseURL: "https://api.example.com/v1",
///     client: RetryingClient(transport: AsyncHTTPClientTransport(), interceptor: Interceptor(retriers: [RetryPolicy()])))
/// let invoice = try await api.send(Endpoint<Invoice>(path: "invoices/42"))
/// ```
///
/// A non-2xx answer, a body that does not decode, a transport failure and an adapter failure
/// each throw their ``APIError`` case. The body is decoded from what the transport kept of it
/// (``HTTPResponseSummary/bodyExcerpt``, 20,000 bytes by default): a longer body is a decoding
/// error, never a silently cut value.
public struct APIClient: Sendable {
    /// The URL every endpoint's path is appended to.
    public let baseURL: String
    /// Sends each request, with its interceptors and in-process retries.
    public let client: RetryingClient
    /// Header fields sent with every request (an endpoint's own fields replace them).
    public let defaultHeaders: HeaderFields
    /// Makes the decoder of each response (a `JSONDecoder` is not `Sendable`, so one is made per
    /// call). Default: a plain `JSONDecoder`.
    public let makeDecoder: @Sendable () -> JSONDecoder
    /// Makes the encoder of each JSON body. Default: a `JSONEncoder` with sorted keys.
    public let makeEncoder: @Sendable () -> JSONEncoder

    /// Creates a client.
    ///
    /// - Parameters:
    ///   - baseURL: An absolute `http` or `https` URL; endpoint paths are relative to it.
    ///   - client: The retrying client every call goes through.
    ///   - defaultHeaders: Fields for every request. Default `Accept: application/json`.
    ///   - makeDecoder: The response decoder. Default `JSONDecoder()`.
    ///   - makeEncoder: The JSON body encoder. Default `JSONEncoder()` with `.sortedKeys`.
    public init(
        baseURL: String,
        client: RetryingClient,
        defaultHeaders: HeaderFields = ["Accept": "application/json"],
        makeDecoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() },
        makeEncoder: @escaping @Sendable () -> JSONEncoder = {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return encoder
        }
    ) {
        self.baseURL = baseURL
        self.client = client
        self.defaultHeaders = defaultHeaders
        self.makeDecoder = makeDecoder
        self.makeEncoder = makeEncoder
    }

    /// Creates a client over `transport` with `interceptor` (default: none, so no retries).
    public init(baseURL: String, transport: any HTTPTransport, interceptor: Interceptor = Interceptor()) {
        self.init(baseURL: baseURL, client: RetryingClient(transport: transport, interceptor: interceptor))
    }

    /// Sends `endpoint` and decodes its 2xx response.
    ///
    /// - Throws: ``APIError``.
    public func send<Response>(_ endpoint: Endpoint<Response>) async throws(APIError) -> Response {
        let request = try self.request(for: endpoint)
        let outcome = await client.send(request)
        switch outcome {
        case .delivered(let response, _):
            return try decode(endpoint, response)
        case .retryLater(let after, _, let last, _):
            throw Self.error(last, retryAfter: after)
        case .gaveUp(_, let last, _):
            throw Self.error(last, retryAfter: nil)
        }
    }

    /// The request `endpoint` becomes, before adapters: URL, headers and encoded body.
    public func request<Response>(for endpoint: Endpoint<Response>) throws(APIError) -> OutboundRequest {
        var url = baseURL
        if !endpoint.path.isEmpty {
            let base = url.hasSuffix("/") ? String(url.dropLast()) : url
            let path = endpoint.path.hasPrefix("/") ? String(endpoint.path.dropFirst()) : endpoint.path
            url = base + "/" + path
        }
        if !endpoint.query.isEmpty {
            var components = URLComponents()
            components.queryItems = endpoint.query
            guard let query = components.percentEncodedQuery else {
                throw .invalidRequest("the query items cannot be encoded")
            }
            // `+` is a space to most servers; URLComponents leaves it as is.
            url += (url.contains("?") ? "&" : "?") + query.replacingOccurrences(of: "+", with: "%2B")
        }
        var headers = defaultHeaders
        for field in endpoint.headers { headers[field.name] = field.value }
        var body: [UInt8]?
        if let content = endpoint.body {
            let contentType: String
            do {
                switch content {
                case .json(let value):
                    body = Array(try makeEncoder().encode(value))
                    contentType = "application/json"
                case .form(let value):
                    body = try FormEncoder().encode(value)
                    contentType = "application/x-www-form-urlencoded"
                case .raw(let bytes, let type):
                    body = bytes
                    contentType = type
                }
            } catch {
                throw .invalidRequest("the body cannot be encoded: \(error)")
            }
            if !endpoint.headers.contains("Content-Type") { headers["Content-Type"] = contentType }
        }
        let request = OutboundRequest(
            method: endpoint.method, url: url, headers: headers, body: body, timeout: endpoint.timeout)
        do {
            try request.validate()
        } catch {
            throw .invalidRequest("\(error)")
        }
        return request
    }

    private func decode<Response>(_ endpoint: Endpoint<Response>, _ response: HTTPResponseSummary) throws(APIError)
        -> Response
    {
        if Response.self == EmptyResponse.self, let empty = EmptyResponse() as? Response { return empty }
        let typeName = String(describing: Response.self)
        guard !response.bodyTruncated else {
            throw .decoding(
                type: typeName, message: "the body is longer than the transport keeps (\(response.bodyExcerpt.count) bytes)",
                bodyExcerpt: "")
        }
        do {
            return try makeDecoder().decode(Response.self, from: Data(response.bodyExcerpt))
        } catch {
            throw .decoding(
                type: typeName, message: Self.describe(error), bodyExcerpt: APIError.redactedExcerpt(response.bodyExcerpt))
        }
    }

    /// The error of a call whose last attempt failed with `failure`.
    static func error(_ failure: AttemptFailure, retryAfter: Duration?) -> APIError {
        switch failure {
        case .response(let response):
            return .status(
                code: response.status, reason: response.reason,
                bodyExcerpt: APIError.redactedExcerpt(response.bodyExcerpt), retryAfter: retryAfter)
        case .transport(let error):
            return .transport(error, retryAfter: retryAfter)
        case .adapter(let error):
            return .adapter("\(error)")
        }
    }

    /// A `DecodingError` as one line naming the field path, without the values it saw.
    static func describe(_ error: any Error) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map(\.stringValue).joined(separator: ".")
            return keys.isEmpty ? "the top level" : keys
        }
        switch error as? DecodingError {
        case .keyNotFound(let key, let context)?:
            let parent = context.codingPath.isEmpty ? "" : " in \(path(context))"
            return "missing field \(key.stringValue)\(parent)"
        case .typeMismatch(let type, let context)?:
            return "\(path(context)) is not a \(type)"
        case .valueNotFound(let type, let context)?:
            return "\(path(context)) is null, expected \(type)"
        case .dataCorrupted(let context)?:
            return context.codingPath.isEmpty ? "the body is not valid JSON" : "\(path(context)) is invalid"
        default:
            return "\(error)"
        }
    }
}
