import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A request the sink received.
public struct SinkRequest: Sendable {
    /// HTTP method.
    public var method: String
    /// Request target as sent (path and query).
    public var uri: String
    /// Header fields in order.
    public var headers: [(String, String)]
    /// The whole body.
    public var body: [UInt8]

    /// The path without the query.
    public var path: String { String(uri.split(separator: "?", maxSplits: 1).first ?? "") }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.0.lowercased() == wanted }?.1
    }
}

/// What the sink does with a request.
public enum SinkResponse: Sendable {
    /// Answers with a status, headers and body.
    case respond(status: Int, headers: [(String, String)] = [], body: [UInt8] = [])
    /// Waits, then answers.
    case delayed(seconds: Double, status: Int, headers: [(String, String)] = [], body: [UInt8] = [])
    /// Closes the connection without answering (the client sees a reset or EOF).
    case close
    /// Never answers and keeps the connection open (the client's timeout fires).
    case hang
}

/// A small HTTP/1.1 server on loopback, answering through a handler closure: the local sink
/// of `courier demo` and `courier bench`, and the test server of the integration tests.
///
/// Keep-alive and pipelined-free; fast enough to take tens of thousands of requests per second
/// on two cores, so benchmarks measure Courier, not the sink.
public final class HTTPSink: Sendable {
    private let channel: any Channel
    /// The port it listens on.
    public let port: Int
    /// The address it listens on.
    public let host: String

    /// Whether it speaks TLS.
    public let secure: Bool

    /// `http://host:port`, or `https://` when it speaks TLS.
    public var baseURL: String { "\(secure ? "https" : "http")://\(host):\(port)" }

    private init(channel: any Channel, host: String, port: Int, secure: Bool) {
        self.channel = channel
        self.host = host
        self.port = port
        self.secure = secure
    }

    /// Starts a sink.
    ///
    /// - Parameters:
    ///   - host: a loopback address (default 127.0.0.1).
    ///   - port: 0 (default) picks a free port.
    ///   - handler: decides each response; called concurrently.
    public static func start(
        host: String = "127.0.0.1", port: Int = 0,
        handler: @escaping @Sendable (SinkRequest) async -> SinkResponse
    ) async throws -> HTTPSink {
        try await start(host: host, port: port, answer: .async(handler))
    }

    /// Starts a sink whose handler answers at once, on the connection's event loop: no task
    /// per request, so a benchmark's sink takes as little of the machine as it can. The
    /// handler must not block; `.delayed` responses are scheduled on the event loop.
    ///
    /// With `tls` it speaks HTTPS with that certificate chain and key (PEM files).
    public static func start(
        host: String = "127.0.0.1", port: Int = 0, tls: SinkTLS? = nil,
        immediate handler: @escaping @Sendable (SinkRequest) -> SinkResponse
    ) async throws -> HTTPSink {
        try await start(host: host, port: port, tls: tls, answer: .immediate(handler))
    }

    private static func start(
        host: String, port: Int, tls: SinkTLS? = nil, answer handler: SinkAnswer
    ) async throws -> HTTPSink {
        let context = try tls.map { tls in
            try NIOSSLContext(
                configuration: .makeServerConfiguration(
                    certificateChain: try NIOSSLCertificate.fromPEMFile(tls.certificateChainFile).map { .certificate($0) },
                    privateKey: .privateKey(try NIOSSLPrivateKey(file: tls.privateKeyFile, format: .pem))))
        }
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(SinkHandler(handler: handler))
                }
            }
        let channel = try await bootstrap.bind(host: host, port: port).get()
        let boundPort = channel.localAddress?.port ?? port
        return HTTPSink(channel: channel, host: host, port: boundPort, secure: tls != nil)
    }

    /// Stops listening. Open connections close with the process or when their peer closes them.
    public func shutdown() async {
        try? await channel.close()
    }
}

/// The certificate of a sink that speaks HTTPS: PEM files of its chain and its private key.
public struct SinkTLS: Sendable {
    /// The server certificate first, then any intermediates.
    public var certificateChainFile: String
    /// Its private key.
    public var privateKeyFile: String

    public init(certificateChainFile: String, privateKeyFile: String) {
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
    }
}

private enum SinkAnswer: Sendable {
    case async(@Sendable (SinkRequest) async -> SinkResponse)
    case immediate(@Sendable (SinkRequest) -> SinkResponse)
}

private final class SinkHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let handler: SinkAnswer
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(handler: SinkAnswer) {
        self.handler = handler
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            head = requestHead
            body.removeAll(keepingCapacity: true)
        case .body(var buffer):
            body.append(contentsOf: buffer.readBytes(length: buffer.readableBytes) ?? [])
        case .end:
            guard let head else { return }
            let request = SinkRequest(
                method: head.method.rawValue, uri: head.uri, headers: head.headers.map { ($0.name, $0.value) },
                body: body)
            let keepAlive = head.isKeepAlive
            let version = head.version
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            switch handler {
            case .immediate(let answer):
                let response = answer(request)
                if case .delayed(let seconds, _, _, _) = response {
                    eventLoop.scheduleTask(in: .nanoseconds(Int64(seconds * 1e9))) {
                        Self.write(response, keepAlive: keepAlive, version: version, context: loopBound.value)
                    }
                } else {
                    Self.write(response, keepAlive: keepAlive, version: version, context: context)
                }
            case .async(let answer):
                Task {
                    let response = await answer(request)
                    if case .delayed(let seconds, _, _, _) = response {
                        try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                    }
                    eventLoop.execute {
                        Self.write(response, keepAlive: keepAlive, version: version, context: loopBound.value)
                    }
                }
            }
        }
    }

    private static func write(
        _ response: SinkResponse, keepAlive: Bool, version: HTTPVersion, context: ChannelHandlerContext
    ) {
        let status: Int, headers: [(String, String)], body: [UInt8]
        switch response {
        case .hang:
            return
        case .close:
            context.close(promise: nil)
            return
        case .respond(let s, let h, let b), .delayed(_, let s, let h, let b):
            (status, headers, body) = (s, h, b)
        }
        var fields = HTTPHeaders(headers)
        fields.replaceOrAdd(name: "content-length", value: String(body.count))
        if !keepAlive { fields.replaceOrAdd(name: "connection", value: "close") }
        let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: status), headers: fields)
        context.write(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
        if !body.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: body.count)
            buffer.writeBytes(body)
            context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(buffer))), promise: nil)
        }
        if keepAlive {
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
        } else {
            let channel = context.channel
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil))).whenComplete { _ in
                channel.close(promise: nil)
            }
        }
    }
}
