import NIOCore
import NIOHTTP1

/// One request to write on a pooled connection, and the promise of what came back.
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
    var promise: EventLoopPromise<HTTPExchangeResult>
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
/// completes its promise with the response head and at most `excerptLimit` body bytes.
///
/// The request goes to the socket (or the TLS handler) as the bytes the transport serialized,
/// head and a small body in one write, past NIO's request encoder and its header validator: the
/// transport's ``RequestValidation`` has checked the method, URL and every header field before.
/// Only the response decoder is NIO's, and it is told each request's method here, as the
/// encoder would have told it.
///
/// It never buffers more than the excerpt: past the limit it completes the promise and closes
/// the connection rather than draining the body. A connection closed, reset or failing while
/// an exchange runs fails it; bytes arriving with no exchange running close the connection.
///
/// A request body goes out in slices while the channel is writable, the next ones when it is
/// writable again, so a 1 MiB body costs one slice of buffer, not a second copy of itself. A
/// response that ends before the body was all sent leaves the connection closed.
final class HTTPExchangeHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPExchange
    typealias OutboundOut = ByteBuffer

    private struct Running {
        var exchange: HTTPExchange
        var requestKeepAlive: Bool
        var head: HTTPResponseHead?
        var excerpt: [UInt8] = []
        var truncated = false
    }

    private var running: Running?
    /// The body still being written, with the promise of the request's end.
    private var sending: (body: [UInt8], offset: Int, end: EventLoopPromise<Void>?)?

    /// Bytes of a body written at a time: 64 KiB.
    static let sliceBytes = 65_536

    /// The connection's response decoder, the one in the pipeline before this handler.
    private let decoder: HTTPResponseDecoder

    init(decoder: HTTPResponseDecoder) {
        self.decoder = decoder
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let exchange = unwrapOutboundIn(data)
        guard running == nil else {
            let error = ChannelError.inappropriateOperationForState
            exchange.promise.fail(HTTPExchangeFailure(underlying: error, responseStarted: false))
            promise?.fail(error)
            return
        }
        running = Running(exchange: exchange, requestKeepAlive: exchange.keepAlive)
        // The decoder reads the answer to a HEAD without a body, whatever its Content-Length.
        decoder.write(data: .head(HTTPRequestHead(version: .http1_1, method: exchange.method, uri: "")))
        var head = exchange.head
        let body = exchange.body ?? []
        if body.count <= Self.sliceBytes {
            head.writeBytes(body)
            context.writeAndFlush(wrapOutboundOut(head), promise: promise)
        } else {
            context.write(wrapOutboundOut(head), promise: nil)
            sending = (body, 0, promise)
            writeBody(context: context)
        }
    }

    /// Writes slices of the body while the channel is writable; the last one carries the
    /// promise of the request's end.
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
            context.write(wrapOutboundOut(slice), promise: end == current.body.count ? current.end : nil)
            wrote = true
        }
        context.flush()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, sending != nil { writeBody(context: context) }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard var current = running else {
            // An answer nobody asked for: the connection can no longer be trusted.
            context.close(promise: nil)
            return
        }
        switch unwrapInboundIn(data) {
        case .head(let head):
            current.head = head
            let announced = head.headers.first(name: "content-length").flatMap { Int($0) } ?? 0
            current.excerpt.reserveCapacity(min(current.exchange.excerptLimit, max(announced, 0), 64 * 1024))
            running = current
        case .body(var chunk):
            let room = current.exchange.excerptLimit - current.excerpt.count
            if chunk.readableBytes > room {
                if room > 0, let part = chunk.readBytes(length: room) { current.excerpt.append(contentsOf: part) }
                current.truncated = true
                running = nil
                finish(current, reusable: false)
                dropSending()
                context.close(promise: nil)
                return
            }
            current.excerpt.append(contentsOf: chunk.readableBytesView)
            running = current
        case .end:
            running = nil
            // A body not all sent leaves the request unfinished on this connection.
            let bodySent = sending == nil
            let reusable = bodySent && current.requestKeepAlive && (current.head?.isKeepAlive ?? false)
            // The answer first: failing the unsent body's promise must not fail the exchange.
            finish(current, reusable: reusable)
            dropSending()
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
            current.exchange.promise.fail(
                HTTPExchangeFailure(underlying: ChannelError.eof, responseStarted: false))
            return
        }
        current.exchange.promise.succeed(
            HTTPExchangeResult(head: head, excerpt: current.excerpt, truncated: current.truncated, reusable: reusable))
    }

    /// Stops writing a body whose answer came before it was all sent (the connection is then
    /// closed).
    private func dropSending() {
        sending?.end?.fail(ChannelError.outputClosed)
        sending = nil
    }

    private func fail(_ error: any Error) {
        sending?.end?.fail(error)
        sending = nil
        guard let current = running else { return }
        running = nil
        current.exchange.promise.fail(HTTPExchangeFailure(underlying: error, responseStarted: current.head != nil))
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
