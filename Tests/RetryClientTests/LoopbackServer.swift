import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// A tiny HTTP/1.1 server on 127.0.0.1 with one behaviour per path, for transport tests.
///
/// - `/ok`: 200 with body `hello`
/// - `/hang`: reads the request and never answers
/// - `/reset`: resets the connection (SO_LINGER 0, then close) on the request head
/// - `/big`: 200 with a 10 MiB body
/// - `/redirect`: 302 to `/ok`
/// - `/status/<code>`: that status, empty body
final class LoopbackServer: @unchecked Sendable {
    static let bigBodySize = 10 * 1024 * 1024

    private let channel: any Channel
    private let lock = NSLock()
    // Guarded by `lock`.
    private var seenPaths: [String] = []
    private var seenHosts: [String] = []

    /// The port the server listens on.
    let port: Int

    private init(channel: any Channel, port: Int) {
        self.channel = channel
        self.port = port
    }

    /// Starts a server on 127.0.0.1, port chosen by the kernel.
    static func start() async throws -> LoopbackServer {
        let recorder = PathRecorder()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(BehaviourHandler(recorder: recorder))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let server = LoopbackServer(channel: channel, port: channel.localAddress?.port ?? 0)
        recorder.server = server
        return server
    }

    /// A port on 127.0.0.1 on which nothing listens: bound by a server that is closed at once.
    static func refusedPort() async throws -> Int {
        let server = try await start()
        let port = server.port
        try await server.stop()
        return port
    }

    /// The URL of `path` on this server.
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// The paths of every request head received, in order.
    var paths: [String] { lock.withLock { seenPaths } }

    /// The `Host` header of every request head received, in order.
    var hosts: [String] { lock.withLock { seenHosts } }

    fileprivate func record(_ path: String, host: String) {
        lock.withLock {
            seenPaths.append(path)
            seenHosts.append(host)
        }
    }

    /// Stops listening; open connections are left to their clients.
    func stop() async throws {
        try await channel.close()
    }
}

/// Forwards recorded paths to the server once it exists (the initializer is built first).
private final class PathRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private weak var _server: LoopbackServer?
    var server: LoopbackServer? {
        get { lock.withLock { _server } }
        set { lock.withLock { _server = newValue } }
    }
    func record(_ path: String, host: String) { server?.record(path, host: host) }
}

private final class BehaviourHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let recorder: PathRecorder
    private var path = ""

    init(recorder: PathRecorder) {
        self.recorder = recorder
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            path = head.uri
            recorder.record(head.uri, host: head.headers.first(name: "host") ?? "")
            if path == "/reset" {
                // On the event loop this takes effect at once; SO_LINGER 0 makes close send RST.
                _ = (context.channel as? any SocketOptionProvider)?.setSoLinger(linger(l_onoff: 1, l_linger: 0))
                context.close(promise: nil)
            }
        case .body:
            break
        case .end:
            respond(context: context)
        }
    }

    private func respond(context: ChannelHandlerContext) {
        switch path {
        case "/ok":
            send(context: context, status: .ok, body: Array("hello".utf8))
        case "/hang", "/reset":
            break
        case "/big":
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: String(LoopbackServer.bigBodySize))
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil
            )
            let chunk = context.channel.allocator.buffer(repeating: UInt8(ascii: "x"), count: 64 * 1024)
            for _ in 0..<(LoopbackServer.bigBodySize / chunk.readableBytes) {
                context.write(wrapOutboundOut(.body(.byteBuffer(chunk))), promise: nil)
            }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        case "/redirect":
            send(context: context, status: .found, headers: ["Location": "/ok"], body: [])
        default:
            if path.hasPrefix("/status/"), let code = Int(path.dropFirst("/status/".count)) {
                send(context: context, status: HTTPResponseStatus(statusCode: code), body: [])
            } else {
                send(context: context, status: .notFound, body: [])
            }
        }
    }

    private func send(
        context: ChannelHandlerContext,
        status: HTTPResponseStatus,
        headers extra: [String: String] = [:],
        body: [UInt8]
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: String(body.count))
        for (name, value) in extra { headers.add(name: name, value: value) }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        if !body.isEmpty {
            context.write(
                wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
