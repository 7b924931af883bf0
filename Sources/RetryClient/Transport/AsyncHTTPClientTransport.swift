import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The production ``HTTPTransport``: one pooled AsyncHTTPClient `HTTPClient` shared by every
/// request, with bounded time and a bounded response read.
public final class AsyncHTTPClientTransport: HTTPTransport {
    /// How the transport connects, waits and reads.
    public struct Configuration: Sendable {
        /// Time allowed to establish a connection (TCP and TLS). Default 10 s.
        public var connectTimeout: Duration = Defaults.connectTimeout
        /// Time allowed for the whole request, from sending to the end of the body excerpt,
        /// unless the request sets its own ``OutboundRequest/timeout``. It is both the deadline
        /// of the request and the idle read timeout. Default 30 s.
        public var totalTimeout: Duration = Defaults.totalTimeout
        /// Most body bytes kept in ``HTTPResponseSummary/bodyExcerpt``; reading stops there and
        /// the connection is closed rather than drained. Default 20,000.
        public var maximumExcerptBytes: Int = Defaults.maximumExcerptBytes
        /// Whether redirects are followed. Default `false`: a 3xx is returned as is, since a
        /// webhook receiver that redirects is misconfigured and following could leave the
        /// allowed targets.
        public var followRedirects: Bool = false
        /// The soft limit of pooled HTTP/1 connections per host. Default 32.
        public var maximumConnectionsPerHost: Int = 32
        /// Whether AsyncHTTPClient itself retries failed connection attempts until the connect
        /// timeout. Default `false`: the retry policy decides about refused connections, and a
        /// refused connection is reported at once instead of after the whole timeout.
        public var retryConnectionEstablishment: Bool = false
        /// Whether AsyncHTTPClient opens a span per request with the globally bootstrapped
        /// tracer (swift-distributed-tracing). Default `false`: even the no-op tracer costs a
        /// few percent of the CPU of a busy sender, and the caller sees every attempt anyway.
        public var tracesRequests: Bool = false
        /// The bounds every request is checked against before it is sent (``RequestValidation``).
        public var requestLimits: RequestLimits = .init()
        /// Most `HTTPClient`s kept for requests with a ``OutboundRequest/connectAddress``, one
        /// per (host, address) pair, each with its own connection pool; the least recently used
        /// one is closed beyond this. Default 256.
        public var maximumPinnedClients: Int = 256

        /// Creates the default configuration; change fields afterwards.
        public init() {}
    }

    /// The configuration this transport was created with.
    public let configuration: Configuration
    private let client: HTTPClient
    private let deadlines = DeadlineWatch()
    private let pinnedClients: PinnedClientCache
    private let logger: Logger?

    /// Creates a transport with its own pooled `HTTPClient` on the shared NIO event loop group.
    ///
    /// Response bodies are never decompressed (the excerpt is of the bytes on the wire) and TLS
    /// certificates are verified with the system trust roots.
    ///
    /// - Parameters:
    ///   - configuration: Timeouts and limits. Defaults to ``Configuration/init()``.
    ///   - logger: Passed to AsyncHTTPClient for its own request logging; `nil` keeps it quiet.
    public init(configuration: Configuration = .init(), logger: Logger? = nil) {
        self.configuration = configuration
        self.logger = logger
        let makeClient: @Sendable ([String: String]) -> HTTPClient = { dnsOverride in
            var ahc = HTTPClient.Configuration()
            ahc.redirectConfiguration = configuration.followRedirects ? .follow(max: 5, allowCycles: false) : .disallow
            ahc.timeout = .init(
                connect: TimeAmount(configuration.connectTimeout),
                read: TimeAmount(configuration.totalTimeout)
            )
            ahc.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = configuration.maximumConnectionsPerHost
            ahc.connectionPool.retryConnectionEstablishment = configuration.retryConnectionEstablishment
            ahc.decompression = .disabled
            ahc.dnsOverride = dnsOverride
            if !configuration.tracesRequests { ahc.tracing.tracer = nil }
            return HTTPClient(eventLoopGroupProvider: .singleton, configuration: ahc)
        }
        self.client = makeClient([:])
        self.pinnedClients = PinnedClientCache(capacity: configuration.maximumPinnedClients, makeClient: makeClient)
    }

    /// The number of clients currently kept for pinned addresses (for tests and metrics).
    public var pinnedClientCount: Int { pinnedClients.count }

    /// Closes the pool; call once before the transport is released.
    public func shutdown() async throws {
        // Close the shared client even when a pinned one fails: an unclosed client traps.
        var pinnedFailure: (any Error)?
        do { try await pinnedClients.shutdown() } catch { pinnedFailure = error }
        try await client.shutdown()
        if let pinnedFailure { throw pinnedFailure }
    }

    /// Closes the pool, blocking the calling thread; never call it on an event loop.
    public func syncShutdown() throws {
        var pinnedFailure: (any Error)?
        do { try pinnedClients.syncShutdown() } catch { pinnedFailure = error }
        try client.syncShutdown()
        if let pinnedFailure { throw pinnedFailure }
    }

    /// Sends `request` once and returns the status, headers and at most
    /// ``Configuration/maximumExcerptBytes`` of the body.
    ///
    /// The request is checked first (``RequestValidation``): one that could be misread on the
    /// wire or crash the HTTP stack never reaches it. One deadline, the request's
    /// ``OutboundRequest/timeout`` or ``Configuration/totalTimeout``, covers connecting, TLS, the
    /// response head and reading the excerpt, so a receiver that trickles its body is cut off
    /// like a silent one. With a ``OutboundRequest/connectAddress`` the connection goes to that
    /// address and nowhere else.
    ///
    /// - Throws: ``TransportError`` classified from the AsyncHTTPClient or NIO error;
    ///   ``TransportError/Kind/invalidRequest`` for a request that fails validation and
    ///   ``TransportError/Kind/readTimeout`` when the deadline passes.
    public func send(_ request: OutboundRequest) async throws -> HTTPResponseSummary {
        let host: String
        do {
            host = try request.validate(limits: configuration.requestLimits).host
        } catch let error as RequestValidationError {
            throw TransportError(kind: .invalidRequest, message: "invalid request: \(error)")
        }
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = HTTPMethod(rawValue: request.method.uppercased())
        for field in request.headers {
            outgoing.headers.add(name: field.name, value: field.value)
        }
        if let body = request.body {
            outgoing.body = .bytes(body)
        }
        let timeout = request.timeout ?? configuration.totalTimeout
        let client: HTTPClient
        var lease: PinnedClientCache.Lease?
        if let address = request.connectAddress {
            // AsyncHTTPClient keys its DNS override by the URL's host as Foundation reads it.
            let urlHost = URL(string: request.url)?.host ?? host
            let pinned = try pinnedClients.acquire(host: urlHost, address: address)
            lease = pinned
            client = pinned.client
        } else {
            client = self.client
        }
        defer { if let lease { pinnedClients.release(lease) } }
        let limit = configuration.maximumExcerptBytes
        let logger = self.logger
        let prepared = outgoing
        do {
            return try await deadlines.run(within: timeout) {
                let deadline = NIODeadline.now() + TimeAmount(timeout)
                let response = try await client.execute(prepared, deadline: deadline, logger: logger)
                let (excerpt, truncated) = try await Self.readExcerpt(of: response.body, limit: limit)
                return HTTPResponseSummary(
                    status: Int(response.status.code),
                    reason: response.status.reasonPhrase,
                    headers: HeaderFields(response.headers.map { ($0.name, $0.value) }),
                    bodyExcerpt: excerpt,
                    bodyTruncated: truncated
                )
            }
        } catch {
            throw Self.classify(error)
        }
    }

    /// Reads at most `limit` bytes of `body`, then stops iterating so the rest is never
    /// buffered; AsyncHTTPClient closes the connection of an abandoned body.
    static func readExcerpt(
        of body: HTTPClientResponse.Body,
        limit: Int
    ) async throws -> (bytes: [UInt8], truncated: Bool) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(min(limit, 64 * 1024))
        var truncated = false
        for try await var chunk in body {
            let room = limit - bytes.count
            if chunk.readableBytes > room {
                if room > 0, let part = chunk.readBytes(length: room) { bytes.append(contentsOf: part) }
                truncated = true
                break
            }
            bytes.append(contentsOf: chunk.readableBytesView)
        }
        return (bytes, truncated)
    }

    /// Maps an AsyncHTTPClient, NIO or system error to a ``TransportError``.
    ///
    /// Typed checks come first; the debug description is the last resort for error types of
    /// modules this target does not import (NIOPosix, NIOSSL).
    static func classify(_ error: any Error) -> TransportError {
        if let error = error as? TransportError { return error }
        let text = String(reflecting: error)
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout, .tlsHandshakeTimeout, .httpProxyHandshakeTimeout, .socksHandshakeTimeout:
                return TransportError(kind: .connectTimeout, message: "connect timed out: \(error)")
            case .readTimeout, .deadlineExceeded, .writeTimeout:
                return TransportError(kind: .readTimeout, message: "no complete response in time: \(error)")
            case .remoteConnectionClosed:
                return TransportError(kind: .connectionReset, message: "remote closed the connection: \(error)")
            case .invalidURL, .emptyHost, .emptyScheme, .missingSocketPath:
                return TransportError(kind: .invalidRequest, message: "invalid URL: \(error)")
            case .cancelled, .requestStreamCancelled:
                return TransportError(kind: .other, message: "cancelled: \(error)")
            case .getConnectionFromPoolTimeout:
                return TransportError(kind: .connectTimeout, message: "no pooled connection in time: \(error)")
            case .bodyLengthMismatch, .contentLengthMissing, .identityCodingIncorrectlyPresent:
                return TransportError(kind: .invalidResponse, message: "invalid HTTP response: \(error)")
            default:
                if text.contains("unsupportedScheme") {
                    return TransportError(kind: .invalidRequest, message: "unsupported URL scheme: \(error)")
                }
            }
        }
        if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNREFUSED:
                return TransportError(kind: .connectRefused, message: "connection refused: \(error)")
            case ECONNRESET, EPIPE, ECONNABORTED:
                return TransportError(kind: .connectionReset, message: "connection reset: \(error)")
            case ETIMEDOUT:
                return TransportError(kind: .connectTimeout, message: "connect timed out: \(error)")
            case ENETUNREACH, EHOSTUNREACH, ENETDOWN:
                return TransportError(kind: .notConnected, message: "network unreachable: \(error)")
            default:
                break
            }
        }
        if let error = error as? ChannelError {
            switch error {
            case .connectTimeout:
                return TransportError(kind: .connectTimeout, message: "connect timed out: \(error)")
            case .eof, .ioOnClosedChannel, .alreadyClosed, .outputClosed, .inputClosed:
                return TransportError(kind: .connectionReset, message: "connection closed: \(error)")
            default:
                break
            }
        }
        if error is CancellationError {
            return TransportError(kind: .other, message: "cancelled")
        }
        return classify(description: text)
    }

    /// The last-resort classification of an error by its debug description.
    static func classify(description text: String) -> TransportError {
        let lower = text.lowercased()
        func has(_ needles: String...) -> Bool { needles.contains { lower.contains($0.lowercased()) } }
        let kind: TransportError.Kind
        // Refused and reset come first: a NIOConnectionError prints its (nil) DNS fields too.
        if has("connectionRefused", "Connection refused", "ECONNREFUSED") {
            kind = .connectRefused
        } else if has("NIOSSL", "handshakeFailed", "certificate", "BoringSSL") {
            kind = .tlsFailure
        } else if has(
            "dnsAError: Optional", "dnsAAAAError: Optional", "getaddrinfo", "Name or service not known",
            "nodename nor servname", "SocketAddressError", "Temporary failure in name resolution"
        ) {
            kind = .dnsFailure
        } else if has("Connection reset", "ECONNRESET", "Broken pipe", "remoteConnectionClosed") {
            kind = .connectionReset
        } else if has("connectTimeout") {
            kind = .connectTimeout
        } else if has("readTimeout", "deadlineExceeded") {
            kind = .readTimeout
        } else if has("Network is unreachable", "No route to host") {
            kind = .notConnected
        } else if has("HTTPParserError", "invalidResponse", "invalid HTTP") {
            kind = .invalidResponse
        } else {
            kind = .other
        }
        return TransportError(kind: kind, message: text)
    }
}
