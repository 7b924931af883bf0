import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

@testable import RetryClient

/// The end of a pooled connection's pipeline, driven by hand on an `EmbeddedChannel`: what it
/// writes for an exchange, and that every exchange hears exactly one reply, whatever the
/// connection does.
final class HTTPExchangeHandlerTests: XCTestCase {
    /// The replies an exchange heard, in order.
    final class Replies: @unchecked Sendable {
        private let lock = NSLock()
        private var list: [Result<HTTPExchangeResult, HTTPExchangeFailure>] = []

        func append(_ reply: Result<HTTPExchangeResult, HTTPExchangeFailure>) { lock.withLock { list.append(reply) } }
        var all: [Result<HTTPExchangeResult, HTTPExchangeFailure>] { lock.withLock { list } }
    }

    /// An exchange that was answered where it should have failed.
    struct UnexpectedAnswer: Error { var status: Int }

    private func connection() throws -> (EmbeddedChannel, HTTPExchangeHandler) {
        let decoder = HTTPResponseDecoder()
        let handler = HTTPExchangeHandler(decoder: decoder)
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPResponseDecoding(decoder: decoder)))
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 80)).wait()
        return (channel, handler)
    }

    private func exchange(_ head: String, body: String? = nil, method: HTTPMethod = .POST, replies: Replies) -> HTTPExchange {
        HTTPExchange(
            method: method, head: ByteBuffer(string: head), keepAlive: true, body: body.map { Array($0.utf8) },
            excerptLimit: 100, reply: { replies.append($0) })
    }

    private func answer(_ reply: Result<HTTPExchangeResult, HTTPExchangeFailure>?) throws -> HTTPExchangeResult {
        switch try XCTUnwrap(reply) {
        case .success(let result): return result
        case .failure(let failure): throw failure.underlying
        }
    }

    private func failure(_ reply: Result<HTTPExchangeResult, HTTPExchangeFailure>?) throws -> HTTPExchangeFailure {
        switch try XCTUnwrap(reply) {
        case .success(let result): throw UnexpectedAnswer(status: Int(result.head.status.code))
        case .failure(let failure): return failure
        }
    }

    func testARequestGoesOutInOneWriteAndEachAnswerRepliesOnceOnTheKeptConnection() throws {
        let (channel, handler) = try connection()
        let replies = Replies()
        let head = "POST /hook HTTP/1.1\r\nHost: receiver\r\nContent-Length: 2\r\n\r\n"
        handler.begin(exchange(head, body: "hi", replies: replies))
        XCTAssertEqual(try channel.readOutbound(as: ByteBuffer.self), ByteBuffer(string: head + "hi"))
        XCTAssertNil(try channel.readOutbound(as: ByteBuffer.self), "head and body go in one write")
        XCTAssertTrue(replies.all.isEmpty, "no reply before the answer")

        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"))
        XCTAssertEqual(replies.all.count, 1)
        let first = try answer(replies.all.first)
        XCTAssertEqual(first.head.status.code, 201)
        XCTAssertEqual(first.excerpt, Array("ok".utf8))
        XCTAssertTrue(first.reusable)

        let second = "GET /next HTTP/1.1\r\nHost: receiver\r\n\r\n"
        handler.begin(exchange(second, method: .GET, replies: replies))
        XCTAssertEqual(try channel.readOutbound(as: ByteBuffer.self), ByteBuffer(string: second))
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 204 No Content\r\n\r\n"))
        XCTAssertEqual(replies.all.count, 2)
        XCTAssertEqual(try answer(replies.all.last).head.status.code, 204)
        XCTAssertTrue(channel.isActive, "a kept-alive connection stays open")
        _ = try channel.finish()
    }

    func testAnExchangeHandedToAClosedConnectionFailsAtOnceAndWritesNothing() throws {
        let (channel, handler) = try connection()
        try channel.close().wait()
        let replies = Replies()
        handler.begin(exchange("POST / HTTP/1.1\r\nHost: receiver\r\nContent-Length: 0\r\n\r\n", replies: replies))
        XCTAssertEqual(replies.all.count, 1)
        let failure = try failure(replies.all.first)
        XCTAssertEqual(failure.underlying as? ChannelError, .ioOnClosedChannel)
        XCTAssertFalse(failure.responseStarted, "nothing of an answer came: the request may go again on a new connection")
    }

    func testAConnectionClosedMidAnswerFailsTheExchangeOnceSayingTheAnswerHadBegun() throws {
        let (channel, handler) = try connection()
        let replies = Replies()
        handler.begin(exchange("POST / HTTP/1.1\r\nHost: receiver\r\nContent-Length: 0\r\n\r\n", replies: replies))
        _ = try channel.readOutbound(as: ByteBuffer.self)
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"))
        XCTAssertTrue(replies.all.isEmpty)
        channel.pipeline.fireChannelInactive()
        try? channel.close().wait()
        XCTAssertEqual(replies.all.count, 1, "one reply, though the decoder, the close and the pipeline's end each end it")
        XCTAssertTrue(try failure(replies.all.first).responseStarted, "the head had come: the request is not sent again")
    }

    func testASecondExchangeWhileOneRunsFailsAndTheFirstStillHearsItsAnswer() throws {
        let (channel, handler) = try connection()
        let first = Replies(), second = Replies()
        handler.begin(exchange("GET /a HTTP/1.1\r\nHost: receiver\r\n\r\n", method: .GET, replies: first))
        handler.begin(exchange("GET /b HTTP/1.1\r\nHost: receiver\r\n\r\n", method: .GET, replies: second))
        XCTAssertEqual(try failure(second.all.first).underlying as? ChannelError, .inappropriateOperationForState)
        XCTAssertEqual(second.all.count, 1)
        XCTAssertEqual(try channel.readOutbound(as: ByteBuffer.self), ByteBuffer(string: "GET /a HTTP/1.1\r\nHost: receiver\r\n\r\n"))
        XCTAssertNil(try channel.readOutbound(as: ByteBuffer.self), "the second request was never written")
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
        XCTAssertEqual(try answer(first.all.first).head.status.code, 200)
        XCTAssertEqual(first.all.count, 1)
        _ = try channel.finish()
    }
}
