import NIOCore
import NIOHTTP1

/// One request to write on a pooled connection, and where what came back goes: `reply` is
/// called exactly once, on the connection's event loop.
struct HTTPExchange: Sendable {
    /// The request's method, for the response decoder: the answer to a HEAD has no body.
    var method: HTTPMethod
    /// The request line and header fields, up to and including the empty line
    /// (``PooledHTTPTransport/requestHead(of:host:port:secure:)``).
    var head: ByteBuffer
    /// Whether the request lets the connection stay open (no `Connection: close`).
    var keepAlive: Bool
    /// The body as the request holds it: a body of at most ``HTTPExchangeHandler/sliceBytes``
    /// goes out in the head's write, a larger one in slices of that size as the connection takes
    /// them, never copied whole.
    var body: [UInt8]?
    /// Most body bytes kept; reading stops there and the connection is closed.
    var excerptLimit: Int
    /// Hears the answer or the failure (the transport resumes its task's continuation).
    var reply: @Sendable (Result<HTTPExchangeResult, HTTPExchangeFailure>) -> Void
}

/// What came back for an ``HTTPExchange``.
struct HTTPExchangeResult: Sendable {
    var head: HTTPResponseHead
    var excerpt: [UInt8]
    var truncated: Bool
    /// Whether the connection may carry another request (HTTP/1.1 keep-alive, complete body).
    var reusable: Bool
}

/// Why an exchange failed, and whether any byte of the response had arrived: a reused
/// connection that fails before its answer began was most likely closed by its server while
/// idle, and the request may go again on a fresh connection.
struct HTTPExchangeFailure: Error {
    var underlying: any Error
    var responseStarted: Bool
}

/// The end of a pooled connection's pipeline: writes one ``HTTPExchange`` at a time and
/// replies with the response head and at most `excerptLimit` body bytes.
///
/// An exchange is handed to ``begin(_:)`` on the connection's event loop
/// (``PooledConnection/start(_:)``), not written into the pipeline: no future for the write, no
/// promise for the answer, no trip through the pipeline's outbound path to reach this, its last
/// handler. A connection that is closed (or whose pipeline was taken apart) when the exchange
/// arrives fails it at once, before anything is written.
///
/// The request goes to the socket (or the TLS handler) as the bytes the transport serialized,
/// head and a small body in one write, past NIO's request encoder and its header validator: the
/// transport's ``RequestValidation`` has checked the method, URL and every header field before.
/// Only the response decoder is NIO's, and it is told each request's method here, as the
/// encoder would have told it. A write that fails closes the channel, which fails the exchange
/// (as `connection closed`).
///
/// It never buffers more than the excerpt: past the limit it replies and closes the
/// connection rather than draining the body. A connection closed, reset or failing while an
/// exchange runs fails it; bytes arriving with no exchange running close the connection.
///
/// A request body goes out in slices while the channel is writable, the next ones when it is
/// writable again, so a 1 MiB body costs one slice of buffer, not a second copy of itself. A
/// response that ends before the body was all sent leaves the connection closed.
final class HTTPExchangeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = ByteBuffer

    private struct Running {
        var exchange: HTTPExchange
        var requestKeepAlive: Bool
        var head: HTTPResponseHead?
        var excerpt: [UInt8] = []
        var truncated = false
    }

    private var running: Running?
    /// The body still being written, and how far.
    private var sending: (body: [UInt8], offset: Int)?
    /// This handler's place in the pipeline while it is in one.
    private var context: ChannelHandlerContext?

    /// Bytes of a body written at a time: 64 KiB.
    static let sliceBytes = 65_536

    /// The connection's response decoder, the one in the pipeline before this handler.
    private let decoder: HTTPResponseDecoder

    init(decoder: HTTPResponseDecoder) {
        self.decoder = decoder
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        fail(ChannelError.ioOnClosedChannel)
    }

    /// Writes `exchange`'s request; its `reply` hears the answer. On the connection's event loop
    /// only.
    func begin(_ exchange: HTTPExchange) {
        guard let context, context.channel.isActive else {
            exchange.reply(.failure(HTTPExchangeFailure(underlying: ChannelError.ioOnClosedChannel, responseStarted: false)))
            return
        }
        guard running == nil else {
            exchange.reply(
                .failure(HTTPExchangeFailure(underlying: ChannelError.inappropriateOperationForState, responseStarted: false)))
            return
        }
        running = Running(exchange: exchange, requestKeepAlive: exchange.keepAlive)
        // The decoder reads the answer to a HEAD without a body, whatever its Content-Length.
        decoder.write(data: .head(HTTPRequestHead(version: .http1_1, method: exchange.method, uri: "")))
        var head = exchange.head
        let body = exchange.body ?? []
        if body.count <= Self.sliceBytes {
            head.writeBytes(body)
            context.writeAndFlush(wrapOutboundOut(head), promise: nil)
        } else {
            context.write(wrapOutboundOut(head), promise: nil)
            sending = (body, 0)
            writeBody(context: context)
        }
    }

    /// Writes slices of the body while the channel is writable.
    private func writeBody(context: ChannelHandlerContext) {
        guard var current = sending else { return }
        sending = nil
        var wrote = false
        while current.offset < current.body.count {
            if wrote && !context.channel.isWritable {
                sending = current
                context.flush()
                return
            }
            let end = min(current.offset + Self.sliceBytes, current.body.count)
            let slice = context.channel.allocator.buffer(bytes: current.body[current.offset..<end])
            current.offset = end
            context.write(wrapOutboundOut(slice), promise: nil)
            wrote = true
        }
        context.flush()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, sending != nil { writeBody(context: context) }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard running != nil else {
            // An answer nobody asked for: the connection can no longer be trusted.
            context.close(promise: nil)
            return
        }
        // `running` is changed where it lies: a copy would copy the exchange and the excerpt
        // for every part of the answer.
        switch unwrapInboundIn(data) {
        case .head(let head):
            let announced = head.headers.first(name: "content-length").flatMap { Int($0) } ?? 0
            running!.head = head
            running!.excerpt.reserveCapacity(min(running!.exchange.excerptLimit, max(announced, 0), 64 * 1024))
        case .body(var chunk):
            let room = running!.exchange.excerptLimit - running!.excerpt.count
            if chunk.readableBytes > room {
                if room > 0, let part = chunk.readBytes(length: room) { running!.excerpt.append(contentsOf: part) }
                running!.truncated = true
                finish(running.take()!, reusable: false)
                sending = nil
                context.close(promise: nil)
                return
            }
            running!.excerpt.append(contentsOf: chunk.readableBytesView)
        case .end:
            let current = running.take()!
            // A body not all sent leaves the request unfinished on this connection.
            let bodySent = sending == nil
            let reusable = bodySent && current.requestKeepAlive && (current.head?.isKeepAlive ?? false)
            finish(current, reusable: reusable)
            sending = nil
            if !reusable { context.close(promise: nil) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(ChannelError.eof)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.close(promise: nil)
    }

    private func finish(_ current: Running, reusable: Bool) {
        guard let head = current.head else {
            current.exchange.reply(.failure(HTTPExchangeFailure(underlying: ChannelError.eof, responseStarted: false)))
            return
        }
        current.exchange.reply(
            .success(
                HTTPExchangeResult(head: head, excerpt: current.excerpt, truncated: current.truncated, reusable: reusable)))
    }

    /// Fails the running exchange, if any (each replies once: `running` is cleared first).
    private func fail(_ error: any Error) {
        sending = nil
        guard let current = running.take() else { return }
        current.exchange.reply(.failure(HTTPExchangeFailure(underlying: error, responseStarted: current.head != nil)))
    }
}

/// NIO's response decoder as the pipeline's decoder, without its watch over the requests
/// written: ``HTTPExchangeHandler`` writes bytes, not request parts, and tells the decoder each
/// request's method itself.
struct HTTPResponseDecoding: ByteToMessageDecoder {
    typealias InboundOut = HTTPClientResponsePart

    let decoder: HTTPResponseDecoder

    mutating func decoderAdded(context: ChannelHandlerContext) {
        decoder.decoderAdded(context: context)
    }

    mutating func decoderRemoved(context: ChannelHandlerContext) {
        decoder.decoderRemoved(context: context)
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        try decoder.decode(context: context, buffer: &buffer)
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws
        -> DecodingState
    {
        try decoder.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
    }
}
