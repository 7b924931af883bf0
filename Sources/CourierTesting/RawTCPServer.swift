import Foundation
import NIOCore
import NIOPosix

/// A TCP server on 127.0.0.1 that speaks no HTTP on its own: it counts accepted connections
/// and received bytes, and answers with a script, for tests of what reaches the wire and of
/// receivers that misbehave in time.
public final class RawTCPServer: @unchecked Sendable {
    /// What the server does once a connection has sent its first bytes.
    public enum Script: Sendable {
        /// Reads and never answers.
        case silent
        /// Sends `bytes` at once.
        case respond([UInt8])
        /// Sends `head` at once, then the `body` one byte every `interval` seconds.
        case trickleBody(head: [UInt8], body: [UInt8], interval: Double)
        /// Sends `response` one byte every `interval` seconds.
        case trickle([UInt8], interval: Double)
        /// Keeps the connection open and sends `bytes` for every read (one per request when a
        /// client sends one small request at a time): a keep-alive receiver.
        case respondEach([UInt8])
        /// Sends `bytes` for the first read, then closes the connection on the next one without
        /// answering: a receiver that dropped an idle connection just as a request came.
        case respondOnceThenCloseOnNext([UInt8])
        /// Sends `bytes`, then closes the connection at once whatever they announced: a
        /// receiver whose idle timeout is zero.
        case respondThenClose([UInt8])
        /// Sends `bytes`, then reads nothing more: a receiver that answers a request before
        /// its body is in (a 413, say) and leaves the rest unread.
        case respondThenStopReading([UInt8])
    }

    private let channel: any Channel
    private let counters: Counters
    /// The port the server listens on.
    public let port: Int

    private init(channel: any Channel, counters: Counters) {
        self.channel = channel
        self.counters = counters
        self.port = channel.localAddress?.port ?? 0
    }

    /// Starts a server on 127.0.0.1 on a port chosen by the kernel.
    public static func start(script: Script) async throws -> RawTCPServer {
        let counters = Counters()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                counters.accepted()
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ScriptHandler(script: script, counters: counters))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return RawTCPServer(channel: channel, counters: counters)
    }

    /// A ready-made HTTP/1.1 response head announcing `contentLength` body bytes; it asks the
    /// client to close, since the script answers once per connection.
    public static func responseHead(status: Int = 200, contentLength: Int) -> [UInt8] {
        Array("HTTP/1.1 \(status) OK\r\ncontent-length: \(contentLength)\r\nconnection: close\r\n\r\n".utf8)
    }

    /// A complete HTTP/1.1 response with no body that lets the client keep the connection.
    public static let keepAliveResponse = Array("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".utf8)

    /// Connections accepted so far.
    public var connections: Int { counters.snapshot().connections }
    /// Bytes received so far, over all connections.
    public var bytesReceived: Int { counters.snapshot().bytes }
    /// The first 64 KiB received, over all connections, in arrival order.
    public var received: [UInt8] { counters.snapshot().data }

    /// Stops listening; open connections are left to their clients.
    public func stop() async throws {
        try await channel.close()
    }
}

private final class Counters: @unchecked Sendable {
    private let lock = NSLock()
    // Guarded by `lock`.
    private var connections = 0
    private var bytes = 0
    private var data: [UInt8] = []

    func accepted() { lock.withLock { connections += 1 } }
    func received(_ buffer: ByteBuffer) {
        lock.withLock {
            bytes += buffer.readableBytes
            data.append(contentsOf: buffer.readableBytesView.prefix(max(0, 65_536 - data.count)))
        }
    }
    func snapshot() -> (connections: Int, bytes: Int, data: [UInt8]) { lock.withLock { (connections, bytes, data) } }
}

private final class ScriptHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let script: RawTCPServer.Script
    private let counters: Counters
    private var started = false
    private var trickleTask: RepeatedTask?

    init(script: RawTCPServer.Script, counters: Counters) {
        self.script = script
        self.counters = counters
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        counters.received(unwrapInboundIn(data))
        switch script {
        case .respondEach(let bytes):
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
            return
        case .respondOnceThenCloseOnNext where started:
            context.close(promise: nil)
            return
        default:
            break
        }
        guard !started else { return }
        started = true
        switch script {
        case .respondEach(let bytes), .respondOnceThenCloseOnNext(let bytes):
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
        case .respondThenClose(let bytes):
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(channel.allocator.buffer(bytes: bytes))).whenComplete { _ in
                channel.close(promise: nil)
            }
        case .silent:
            break
        case .respond(let bytes):
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
        case .respondThenStopReading(let bytes):
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        case .trickleBody(let head, let body, let interval):
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: head)), promise: nil)
            trickle(body, interval: interval, context: context)
        case .trickle(let bytes, let interval):
            trickle(bytes, interval: interval, context: context)
        }
    }

    private func trickle(_ bytes: [UInt8], interval: Double, context: ChannelHandlerContext) {
        let remaining = NIOLoopBoundBox(bytes[...], eventLoop: context.eventLoop)
        let channel = context.channel
        let delay = TimeAmount.milliseconds(Int64(interval * 1000))
        trickleTask = channel.eventLoop.scheduleRepeatedTask(initialDelay: delay, delay: delay) { task in
            guard let byte = remaining.value.popFirst(), channel.isActive else {
                task.cancel()
                return
            }
            channel.writeAndFlush(channel.allocator.buffer(bytes: [byte]), promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        trickleTask?.cancel()
        context.fireChannelInactive()
    }
}
