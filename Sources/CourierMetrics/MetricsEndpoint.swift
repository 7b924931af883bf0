import NIOCore
import NIOHTTP1
import NIOPosix

/// The HTTP side of ``MetricsServer``: answers `GET /metrics` (and `HEAD`) with the text a
/// closure renders at that moment, 404 for other paths and 405 for other methods.
///
/// It is deliberately small and separate from the loopback receiver of tests and benchmarks
/// (`CourierSink`): a production process should not carry a test server, and this one needs
/// no request bodies, no delays and no handlers of its caller's.
final class MetricsEndpoint: Sendable {
    private let channel: any Channel
    /// The port it listens on (the one the kernel chose when asked for 0).
    let port: Int

    private init(channel: any Channel, port: Int) {
        self.channel = channel
        self.port = port
    }

    /// Listens on `host:port`; `render` is called on an event loop for every scrape.
    /// Blocks until it listens (or binding failed).
    static func start(host: String, port: Int, render: @escaping @Sendable () -> [UInt8]) throws -> MetricsEndpoint {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(ScrapeHandler(render: render))
                }
            }
        let channel = try bootstrap.bind(host: host, port: port).wait()
        return MetricsEndpoint(channel: channel, port: channel.localAddress?.port ?? port)
    }

    /// Stops listening; blocks until the socket is closed.
    func shutdown() {
        try? channel.close().wait()
    }
}

/// What a request gets: a pure decision on its method and path.
enum ScrapeAnswer: Equatable {
    case metrics(includeBody: Bool)
    case notFound
    case methodNotAllowed

    static func of(method: HTTPMethod, uri: String) -> ScrapeAnswer {
        let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard path == "/metrics" else { return .notFound }
        switch method {
        case .GET: return .metrics(includeBody: true)
        case .HEAD: return .metrics(includeBody: false)
        default: return .methodNotAllowed
        }
    }
}

private final class ScrapeHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let render: @Sendable () -> [UInt8]

    init(render: @escaping @Sendable () -> [UInt8]) { self.render = render }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A scrape has no body: answer at the head, ignore the rest of the request.
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        var status = HTTPResponseStatus.ok
        var body: [UInt8] = []
        var headers = HTTPHeaders()
        switch ScrapeAnswer.of(method: head.method, uri: head.uri) {
        case .metrics(let includeBody):
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
            let text = render()
            headers.add(name: "Content-Length", value: String(text.count))
            if includeBody { body = text }
        case .notFound:
            status = .notFound
            body = Array("not found: the metrics are at /metrics\n".utf8)
        case .methodNotAllowed:
            status = .methodNotAllowed
            headers.add(name: "Allow", value: "GET, HEAD")
            body = Array("use GET /metrics\n".utf8)
        }
        if headers["Content-Length"].isEmpty { headers.add(name: "Content-Length", value: String(body.count)) }
        if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
                      promise: nil)
        if !body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let keepAlive = head.isKeepAlive
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}
