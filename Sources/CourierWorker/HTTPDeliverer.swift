import AsyncHTTPClient
import CourierCore
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// How deliveries are sent.
public struct HTTPDelivererConfiguration: Sendable {
    /// Connect timeout in seconds (default 10).
    public var connectTimeout: Double = 10
    /// Total time for one request, response head and excerpt included, in seconds (default 30).
    public var totalTimeout: Double = 30
    /// Bytes of the response body kept as the excerpt; the rest is not read (default 20,000).
    public var maximumExcerptBytes: Int = 20_000
    /// Allow private, loopback, link-local and other non-global targets (default false).
    public var allowPrivateTargets: Bool = false
    /// Connections kept per host (default 32; match the per-host in-flight cap).
    public var maximumConnectionsPerHost: Int = 32
    /// In-process retries of a refused or reset connection before anything was received
    /// (default 2), each after `quickRetryDelay`.
    public var quickRetries: Int = 2
    /// Delay before a quick in-process retry, in seconds (default 0.1).
    public var quickRetryDelay: Double = 0.1
    /// The `User-Agent` sent unless the job sets one.
    public var userAgent: String = "Courier/0.1"

    /// The defaults above.
    public init() {}
}

/// Sends claimed jobs over HTTP with one shared, pooled AsyncHTTPClient: no redirects, bounded
/// excerpt, connect and total timeouts, Standard Webhooks signatures when the queue has a
/// secret, and refusal of non-global targets unless allowed.
///
/// Every request carries `courier-job-id` and `courier-attempt` (and, when signed,
/// `webhook-id`, stable across retries) so receivers can deduplicate and trace.
public final class HTTPDeliverer: Deliverer, Sendable {
    private let client: HTTPClient
    private let configuration: HTTPDelivererConfiguration
    private let logger: Logger

    /// Creates a deliverer with its own HTTP client; call `shutdown()` when done.
    public init(configuration: HTTPDelivererConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        var clientConfiguration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(
                connect: .milliseconds(Int64(configuration.connectTimeout * 1000)),
                read: .milliseconds(Int64(configuration.totalTimeout * 1000))),
            connectionPool: .init(
                idleTimeout: .seconds(60),
                concurrentHTTP1ConnectionsPerHostSoftLimit: configuration.maximumConnectionsPerHost))
        clientConfiguration.decompression = .disabled
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
    }

    /// Closes the client's connections.
    public func shutdown() {
        try? client.syncShutdown()
    }

    public func deliver(_ job: ClaimedJob) async -> DeliveryReport {
        if !configuration.allowPrivateTargets {
            do {
                if let address = try await resolveNonGlobal(job.host) {
                    return DeliveryReport(
                        result: .permanent(
                            status: nil,
                            error: "refused private target: \(job.host) resolves to \(address) (allow with --allow-private-targets)"),
                        responseExcerpt: nil)
                }
            } catch {
                return DeliveryReport(result: .retryable(status: nil, error: "\(error)", retryAfter: nil), responseExcerpt: nil)
            }
        }
        let request: HTTPClientRequest
        do {
            request = try makeRequest(job)
        } catch {
            return DeliveryReport(result: .permanent(status: nil, error: "\(error)"), responseExcerpt: nil)
        }
        var quickRetriesLeft = configuration.quickRetries
        while true {
            do {
                let response = try await client.execute(
                    request, deadline: .now() + .milliseconds(Int64(configuration.totalTimeout * 1000)))
                let excerpt = try await readExcerpt(response.body)
                return DeliveryReport(
                    result: Self.classify(status: Int(response.status.code), headers: response.headers,
                                          reason: response.status.reasonPhrase),
                    responseExcerpt: excerpt)
            } catch {
                let failure = Self.classify(error: error, url: job.url, configuration: configuration)
                if failure.quick && quickRetriesLeft > 0 && !Task.isCancelled {
                    quickRetriesLeft -= 1
                    try? await Task.sleep(nanoseconds: UInt64(configuration.quickRetryDelay * 1e9))
                    continue
                }
                return DeliveryReport(result: failure.result, responseExcerpt: nil)
            }
        }
    }

    private func resolveNonGlobal(_ host: String) async throws -> String? {
        // getaddrinfo blocks: keep it off the async executor's few threads.
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try TargetPolicy.firstNonGlobalAddress(of: host) })
            }
        }
    }

    private func makeRequest(_ job: ClaimedJob) throws -> HTTPClientRequest {
        var request = HTTPClientRequest(url: job.url)
        request.method = HTTPMethod(rawValue: job.method)
        var hasUserAgent = false
        for (name, value) in job.headers {
            if name.lowercased() == "user-agent" { hasUserAgent = true }
            request.headers.add(name: name, value: value)
        }
        if !hasUserAgent { request.headers.add(name: "User-Agent", value: configuration.userAgent) }
        request.headers.add(name: "courier-job-id", value: String(job.id))
        request.headers.add(name: "courier-attempt", value: String(job.attempt))
        let body = job.body ?? []
        if let secret = job.signingSecret {
            let messageID = "job_\(job.id)"
            let timestamp = Int(Date().timeIntervalSince1970)
            let signature = try WebhookSignature.sign(secret: secret, id: messageID, timestamp: timestamp, body: body)
            request.headers.add(name: "webhook-id", value: messageID)
            request.headers.add(name: "webhook-timestamp", value: String(timestamp))
            request.headers.add(name: "webhook-signature", value: signature)
        }
        if job.body != nil { request.body = .bytes(ByteBuffer(bytes: body)) }
        return request
    }

    /// Reads at most `maximumExcerptBytes`; stopping early abandons the rest of the body (the
    /// connection is closed rather than the body buffered).
    private func readExcerpt(_ body: HTTPClientResponse.Body) async throws -> String? {
        var kept: [UInt8] = []
        let limit = configuration.maximumExcerptBytes
        for try await var chunk in body {
            let take = min(limit - kept.count, chunk.readableBytes)
            if take > 0, let bytes = chunk.readBytes(length: take) { kept += bytes }
            if kept.count >= limit { break }
        }
        if kept.isEmpty { return nil }
        // Text columns cannot hold NUL; invalid UTF-8 becomes U+FFFD.
        var text = String(decoding: kept, as: UTF8.self)
        if text.contains("\0") { text = text.replacingOccurrences(of: "\0", with: "") }
        while text.utf8.count > limit { text.removeLast() }
        return text
    }

    /// Maps a response to the queue's view (DESIGN.md §3): 2xx delivered; 408, 425, 429, 5xx
    /// retryable (with `Retry-After` when sent); everything else, 3xx included, permanent.
    static func classify(status: Int, headers: HTTPHeaders, reason: String) -> DeliveryResult {
        let description = "HTTP \(status) \(reason)"
        switch status {
        case 200..<300:
            return .delivered(status: status)
        case 408, 425, 429, 500..<600:
            return .retryable(
                status: status, error: description,
                retryAfter: headers.first(name: "retry-after").flatMap { RetryAfter.seconds($0, now: Date()) })
        case 300..<400:
            return .permanent(status: status, error: description + " (redirects are not followed)")
        default:
            return .permanent(status: status, error: description)
        }
    }

    /// Maps a transport error; `quick` marks the clearly transient ones worth an in-process retry.
    static func classify(error: any Error, url: String, configuration: HTTPDelivererConfiguration)
        -> (result: DeliveryResult, quick: Bool)
    {
        let text = String(describing: error)
        if let clientError = error as? HTTPClientError {
            if clientError == .connectTimeout {
                return (.retryable(status: nil, error: "connect timeout after \(Int(configuration.connectTimeout)) s", retryAfter: nil), false)
            }
            if clientError == .readTimeout || clientError == .deadlineExceeded {
                return (.retryable(status: nil, error: "timeout after \(Int(configuration.totalTimeout)) s", retryAfter: nil), false)
            }
            if clientError == .remoteConnectionClosed {
                return (.retryable(status: nil, error: "connection closed by the server before a response", retryAfter: nil), true)
            }
            if clientError == .invalidURL || clientError == .emptyHost || clientError == .emptyScheme
                || text.contains("unsupportedScheme")
            {
                return (.permanent(status: nil, error: "invalid URL: \(url)"), false)
            }
        }
        if let ioError = error as? IOError {
            if ioError.errnoCode == ECONNREFUSED {
                return (.retryable(status: nil, error: "connection refused", retryAfter: nil), true)
            }
            if ioError.errnoCode == ECONNRESET || ioError.errnoCode == EPIPE {
                return (.retryable(status: nil, error: "connection reset", retryAfter: nil), true)
            }
        }
        if text.contains("connectionRefused") || text.contains("Connection refused") {
            return (.retryable(status: nil, error: "connection refused", retryAfter: nil), true)
        }
        if text.contains("NIOSSL") || text.contains("handshakeFailed") || text.contains("certificate") {
            return (.permanent(status: nil, error: "TLS failure: \(text.prefix(200))"), false)
        }
        if text.contains("connectTimeout") {
            return (.retryable(status: nil, error: "connect timeout after \(Int(configuration.connectTimeout)) s", retryAfter: nil), false)
        }
        return (.retryable(status: nil, error: "transport error: \(text.prefix(200))", retryAfter: nil), false)
    }
}

/// Standard Webhooks signing: `v1,<base64 HMAC-SHA256(key, "id.timestamp.body")>`, the key
/// given as `whsec_<base64>`.
public enum WebhookSignature {
    /// Signs one message.
    public static func sign(secret: String, id: String, timestamp: Int, body: [UInt8]) throws -> String {
        guard secret.hasPrefix("whsec_"), let key = Data(base64Encoded: String(secret.dropFirst(6))) else {
            throw TargetError(message: "signing secret is not whsec_<base64>")
        }
        var message = Array("\(id).\(timestamp).".utf8)
        message += body
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key))
        return "v1," + Data(mac).base64EncodedString()
    }
}

/// `Retry-After` in both forms: delta-seconds or an HTTP-date.
public enum RetryAfter {
    /// Seconds to wait from `now`, or nil when the value is neither form.
    public static func seconds(_ value: String, now: Date) -> Double? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed) { return Double(max(0, seconds)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}
