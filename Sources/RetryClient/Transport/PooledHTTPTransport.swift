import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The delivery transport: HTTP/1.1 on SwiftNIO with one pool of keep-alive connections for
/// every host, sized for webhooks to thousands of receivers.
///
/// Connections are pooled per (scheme, host, port, checked address) under one budget of
/// ``Configuration/maximumConnections`` over all hosts; at the budget an idle connection picked
/// at random is closed to make room, and when all are busy a request waits for one. All
/// connections share one event loop group (NIO's singleton) and one TLS context; there is no
/// client object per host, so a thousand receivers cost a thousand sockets, not a thousand
/// clients.
///
/// Every guarantee of ``AsyncHTTPClientTransport`` holds: requests are checked before the wire
/// (``RequestValidation``); with a ``OutboundRequest/connectAddress`` the connection goes to
/// that address and nowhere else while the `Host` header, TLS SNI and certificate checks use
/// the URL's host; one deadline covers waiting for a connection, connecting, TLS, the response
/// head and the excerpt; at most ``Configuration/maximumExcerptBytes`` of a body are read, then
/// the connection is closed; redirects are returned, never followed.
///
/// A pooled connection that its server closed while idle is dropped as soon as the close is
/// seen; if a request on a reused connection fails before any byte of the answer arrived (the
/// server closed it as the request was written), it is sent once more on a new connection.
public final class PooledHTTPTransport: HTTPTransport {
    /// How the transport connects, pools, waits and reads.
    public struct Configuration: Sendable {
        /// Time allowed to establish a connection (TCP and TLS). Default 10 s.
        public var connectTimeout: Duration = Defaults.connectTimeout
        /// Time allowed for the whole request, from asking for a connection to the end of the
        /// body excerpt, unless the request sets its own ``OutboundRequest/timeout``. Default 30 s.
        public var totalTimeout: Duration = Defaults.totalTimeout
        /// Most body bytes kept in ``HTTPResponseSummary/bodyExcerpt``; reading stops there and
        /// the connection is closed rather than drained. Default 20,000.
        public var maximumExcerptBytes: Int = Defaults.maximumExcerptBytes
        /// Connections open at once over all hosts, idle or busy. Default 2,048: a connection
        /// each for two thousand receivers, well below the worker unit's `LimitNOFILE`.
        public var maximumConnections: Int = Defaults.maximumConnections
        /// Connections open at once to one (host, address). Default 32.
        public var maximumConnectionsPerHost: Int = 32
        /// How long an idle connection is kept. Default 60 s.
        public var idleTimeout: Duration = .seconds(60)
        /// The TLS settings of `https` connections. Default: TLS 1.2 or later, certificates
        /// verified against the system trust roots and the URL's host.
        public var tlsConfiguration: TLSConfiguration = .makeClientConfiguration()
        /// PEM files of certificate authorities trusted besides ``tlsConfiguration``'s roots,
        /// for receivers with a private CA. Default none.
        public var additionalTrustRootFiles: [String] = []
        /// The bounds every request is checked against before it is sent (``RequestValidation``).
        public var requestLimits: RequestLimits = .init()

        /// Creates the default configuration; change fields afterwards.
        public init() {}
    }

    /// The configuration this transport was created with.
    public let configuration: Configuration
    private let pool: ConnectionPool
    private let deadlines = DeadlineWatch()

    /// Creates a transport on NIO's shared event loop group.
    ///
    /// A TLS configuration that cannot be loaded (unreadable trust roots) fails every `https`
    /// request as a ``TransportError/Kind/tlsFailure``, not the creation.
    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
        let tls = LazyTLSContext { try Self.tlsContext(configuration) }
        let group = MultiThreadedEventLoopGroup.singleton
        pool = ConnectionPool(
            limits: .init(
                maximumConnections: configuration.maximumConnections,
                maximumPerKey: configuration.maximumConnectionsPerHost,
                idleTimeout: UInt64(max(0, configuration.idleTimeout.inNanoseconds)))
        ) { key, id, timeout in
            try await Self.connect(key, id: id, timeout: timeout, tls: tls, group: group)
        }
    }

    /// Why `configuration`'s TLS settings cannot be used (an unreadable or invalid trust root
    /// file), or `nil`: for a caller that wants to refuse them at start rather than fail every
    /// `https` request.
    public static func tlsProblem(in configuration: Configuration) -> String? {
        do {
            _ = try tlsContext(configuration)
            return nil
        } catch let error as TransportError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    private static func tlsContext(_ configuration: Configuration) throws -> NIOSSLContext {
        var tls = configuration.tlsConfiguration
        for file in configuration.additionalTrustRootFiles {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw TransportError(kind: .tlsFailure, message: "cannot read \(file)")
            }
            let certificates = (try? NIOSSLCertificate.fromPEMFile(file)) ?? []
            guard !certificates.isEmpty else {
                throw TransportError(kind: .tlsFailure, message: "\(file) holds no PEM certificate")
            }
            tls.additionalTrustRoots.append(.certificates(certificates))
        }
        return try NIOSSLContext(configuration: tls)
    }

    /// Connections open (idle or busy) and idle now, and requests waiting for a connection
    /// (for tests and metrics).
    public var connectionCounts: (open: Int, idle: Int, waiting: Int) { pool.counts }

    /// Idle connections closed to make room for another host's under
    /// ``Configuration/maximumConnections``, since the transport began: when it keeps growing,
    /// the budget is smaller than the hosts in use, and connections are opened again and again.
    public var connectionsEvicted: Int { pool.evictions }

    /// Closes idle connections and refuses further requests; busy connections close when their
    /// request ends.
    public func shutdown() async throws {
        for channel in pool.shutdown() { try? await channel.closeFuture.get() }
    }

    /// Closes like ``shutdown()``, blocking the calling thread; never call it on an event loop.
    public func syncShutdown() throws {
        for channel in pool.shutdown() { try? channel.closeFuture.wait() }
    }

    /// Sends `request` once and returns the status, headers and at most
    /// ``Configuration/maximumExcerptBytes`` of the body.
    ///
    /// - Throws: ``TransportError``: ``TransportError/Kind/invalidRequest`` for a request that
    ///   fails validation, ``TransportError/Kind/readTimeout`` when the deadline passes, and the
    ///   kind of the network or TLS failure otherwise.
    public func send(_ request: OutboundRequest) async throws -> HTTPResponseSummary {
        let target: (scheme: String, host: String, port: Int)
        do {
            target = try request.validate(limits: configuration.requestLimits)
        } catch let error as RequestValidationError {
            throw TransportError(kind: .invalidRequest, message: "invalid request: \(error)")
        }
        let key = PoolKey(
            secure: target.scheme == "https", host: target.host.lowercased(), port: target.port,
            address: request.connectAddress)
        let head = Self.requestHead(of: request, host: target.host, port: target.port, secure: key.secure)
        let body = request.body
        let timeout = request.timeout ?? configuration.totalTimeout
        let limit = configuration.maximumExcerptBytes
        let connectTimeout = configuration.connectTimeout
        let pool = self.pool
        do {
            // The deadline stops whichever step the request waits in: the wait for a
            // connection, or the exchange (by closing its connection); opening a connection is
            // bounded by the time left.
            return try await deadlines.cutOff(within: timeout) { cutoff in
                let started = ContinuousClock.now
                var allowReuse = true
                while true {
                    if cutoff.isExpired { throw CancellationError() }
                    let remaining = timeout - (ContinuousClock.now - started)
                    let lease = try await pool.lease(
                        key, allowReuse: allowReuse, connectTimeout: min(connectTimeout, remaining), cutoff: cutoff)
                    do {
                        let connection = lease.connection
                        let result = try await cutoff.during({ connection.close() }) {
                            try await Self.exchange(on: connection, head: head, body: body, limit: limit)
                        }
                        pool.release(lease, reusable: result.reusable)
                        return HTTPResponseSummary(
                            status: Int(result.head.status.code), reason: result.head.status.reasonPhrase,
                            headers: HeaderFields(result.head.headers.map { ($0.name, $0.value) }),
                            bodyExcerpt: result.excerpt, bodyTruncated: result.truncated)
                    } catch let failure as HTTPExchangeFailure {
                        pool.release(lease, reusable: false)
                        // A reused connection closed under a request it never answered: its
                        // server dropped it while idle. Once more on a new connection.
                        if lease.reused, allowReuse, !failure.responseStarted, !Task.isCancelled, !cutoff.isExpired,
                            AsyncHTTPClientTransport.classify(failure.underlying).kind == .connectionReset
                        {
                            allowReuse = false
                            continue
                        }
                        throw failure.underlying
                    } catch {
                        pool.release(lease, reusable: false)
                        throw error
                    }
                }
            }
        } catch {
            throw AsyncHTTPClientTransport.classify(error)
        }
    }

    /// Sends `head` and `body` on `connection`; cancelling the task closes the connection.
    private static func exchange(
        on connection: PooledConnection, head: RequestHead, body: [UInt8]?, limit: Int
    ) async throws -> HTTPExchangeResult {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                connection.start(
                    HTTPExchange(
                        method: head.method, head: head.bytes, keepAlive: head.keepAlive, body: body,
                        excerptLimit: limit, reply: { continuation.resume(with: $0) }))
            }
        } onCancel: {
            connection.close()
        }
    }

    /// A request's head as it goes on the wire, with what the connection needs to know of it.
    struct RequestHead {
        var method: HTTPMethod
        /// The request line, the header fields and the empty line after them.
        var bytes: ByteBuffer
        /// Whether the request lets the connection stay open (no `close` in `Connection`).
        var keepAlive: Bool
    }

    /// The request head of a request that passed validation: the method in upper case, the
    /// URL's path and query, `Host` from the URL unless the request sets one, the request's
    /// fields as they are, and the body's `Content-Length` in place of any framing field it
    /// carries (`Content-Length: 0` for a POST, PUT or PATCH without a body).
    static func requestHead(of request: OutboundRequest, host: String, port: Int, secure: Bool) -> RequestHead {
        let methodName = request.method.uppercased()
        var estimate = methodName.utf8.count + request.url.utf8.count + host.utf8.count + 64
        for field in request.headers { estimate += field.name.utf8.count + field.value.utf8.count + 4 }
        var bytes = ByteBufferAllocator().buffer(capacity: estimate)
        bytes.writeString(methodName)
        bytes.writeInteger(UInt8(ascii: " "))
        writeRequestTarget(of: request.url, to: &bytes)
        bytes.writeStaticString(" HTTP/1.1\r\n")
        if request.headers["host"] == nil {
            bytes.writeStaticString("Host: ")
            let bracketed = host.utf8.contains(UInt8(ascii: ":"))
            if bracketed { bytes.writeInteger(UInt8(ascii: "[")) }
            bytes.writeString(host)
            if bracketed { bytes.writeInteger(UInt8(ascii: "]")) }
            if port != (secure ? 443 : 80) {
                bytes.writeInteger(UInt8(ascii: ":"))
                bytes.writeString(String(port))
            }
            bytes.writeStaticString("\r\n")
        }
        var keepAlive = true
        for field in request.headers {
            if HeaderFields.sameName(field.name, "content-length") || HeaderFields.sameName(field.name, "transfer-encoding") {
                continue
            }
            if keepAlive, HeaderFields.sameName(field.name, "connection"), Self.namesClose(field.value) {
                keepAlive = false
            }
            bytes.writeString(field.name)
            bytes.writeStaticString(": ")
            bytes.writeString(field.value)
            bytes.writeStaticString("\r\n")
        }
        let method = HTTPMethod(rawValue: methodName)
        if let body = request.body {
            bytes.writeStaticString("Content-Length: ")
            bytes.writeString(String(body.count))
            bytes.writeStaticString("\r\n")
        } else if method == .POST || method == .PUT || method == .PATCH {
            bytes.writeStaticString("Content-Length: 0\r\n")
        }
        bytes.writeStaticString("\r\n")
        return RequestHead(method: method, bytes: bytes, keepAlive: keepAlive)
    }

    /// Whether a `Connection` field's value lists the `close` option (case-insensitive).
    static func namesClose(_ value: String) -> Bool {
        value.split(separator: ",").contains { option in
            HeaderFields.sameName(option.trimmingCharacters(in: .whitespaces), "close")
        }
    }

    /// Writes the origin-form target of an absolute URL that passed validation to `buffer`: its
    /// path and query, `/` when it has no path, never its fragment.
    static func writeRequestTarget(of url: String, to buffer: inout ByteBuffer) {
        var url = url
        url.withUTF8 { bytes in
            guard let separator = RequestValidation.firstSeparator(in: bytes) else {
                buffer.writeInteger(UInt8(ascii: "/"))
                return
            }
            var start = separator + 3
            while start < bytes.count, !RequestValidation.isAuthorityEnd(bytes[start]) { start += 1 }
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: "#") { end += 1 }
            if start == end || bytes[start] != UInt8(ascii: "/") { buffer.writeInteger(UInt8(ascii: "/")) }
            buffer.writeBytes(UnsafeBufferPointer(rebasing: bytes[start..<end]))
        }
    }

    /// Opens connection `id` for `key`: TCP to the checked address (or the resolved host),
    /// TLS with the URL's host as SNI and certificate name, then the HTTP/1.1 codec.
    private static func connect(
        _ key: PoolKey, id: Int, timeout: Duration, tls: LazyTLSContext,
        group: MultiThreadedEventLoopGroup
    ) async throws -> PooledConnection {
        let context: NIOSSLContext? = key.secure ? try tls.get() : nil
        let serverName: String? = RequestValidation.isIPLiteral(key.host) ? nil : key.host
        let connectTimeout = TimeAmount(max(timeout, .milliseconds(1)))
        let setup = ChannelSetup()
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(connectTimeout)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context {
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLClientHandler(context: context, serverHostname: serverName))
                        let watcher = TLSHandshakeWatcher(handshake: channel.eventLoop.makePromise(), timeout: connectTimeout)
                        setup.setHandshake(watcher.handshake.futureResult)
                        try channel.pipeline.syncOperations.addHandler(watcher)
                    }
                    // NIO's response decoder; the request's bytes are the transport's own.
                    let decoder = HTTPResponseDecoder()
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(HTTPResponseDecoding(decoder: decoder)))
                    let exchange = HTTPExchangeHandler(decoder: decoder)
                    try channel.pipeline.syncOperations.addHandler(exchange)
                    setup.setExchange(NIOLoopBound(exchange, eventLoop: channel.eventLoop))
                }
            }
        let channel: any Channel
        if let address = key.address {
            channel = try await bootstrap.connect(to: SocketAddress(ipAddress: address, port: key.port)).get()
        } else {
            channel = try await bootstrap.connect(host: key.host, port: key.port).get()
        }
        if key.secure {
            // No request is written before the handshake is done (TLSHandshakeWatcher).
            do {
                try await withTaskCancellationHandler {
                    guard let done = setup.handshake else { throw ChannelError.inappropriateOperationForState }
                    try await done.get()
                } onCancel: {
                    channel.close(promise: nil)
                }
            } catch {
                channel.close(promise: nil)
                throw error
            }
        }
        guard let exchange = setup.exchange else {
            channel.close(promise: nil)
            throw ChannelError.inappropriateOperationForState
        }
        return PooledConnection(id: id, channel: channel, handler: exchange)
    }
}

/// Hands what a channel's initializer made (the TLS handshake's future, the exchange handler) to
/// the code that connected.
private final class ChannelSetup: @unchecked Sendable {
    private let lock = NSLock()
    // Guarded by `lock`.
    private var handshakeFuture: EventLoopFuture<Void>?
    private var exchangeHandler: NIOLoopBound<HTTPExchangeHandler>?

    func setHandshake(_ future: EventLoopFuture<Void>) { lock.withLock { handshakeFuture = future } }
    func setExchange(_ handler: NIOLoopBound<HTTPExchangeHandler>) { lock.withLock { exchangeHandler = handler } }
    var handshake: EventLoopFuture<Void>? { lock.withLock { handshakeFuture } }
    var exchange: NIOLoopBound<HTTPExchangeHandler>? { lock.withLock { exchangeHandler } }
}

/// The transport's TLS context, made at its first `https` connection and kept: reading the
/// system's trust roots takes tens of milliseconds, which a worker starting to deliver plain
/// HTTP, or one that never sends HTTPS, need not wait for. A context that cannot be made
/// fails every `https` request the same way.
final class LazyTLSContext: @unchecked Sendable {
    private let lock = NSLock()
    private let make: @Sendable () throws -> NIOSSLContext
    // Guarded by `lock`.
    private var made: Result<NIOSSLContext, any Error>?

    init(_ make: @escaping @Sendable () throws -> NIOSSLContext) { self.make = make }

    func get() throws -> NIOSSLContext {
        try lock.withLock {
            if let made { return made }
            let result = Result { try make() }
            made = result
            return result
        }.get()
    }
}
