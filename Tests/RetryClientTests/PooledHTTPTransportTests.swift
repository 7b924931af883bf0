import CourierSink
import CourierTesting
import Foundation
import NIOSSL
import RetryClient
import XCTest

/// `PooledHTTPTransport`'s pool against real servers on 127.0.0.1: keep-alive reuse, one
/// budget over all hosts, least-recently-used eviction, receivers that close idle
/// connections, idle expiry, and TLS names checked against a CA made for the test.
/// (The guarantees it shares with `AsyncHTTPClientTransport` are in
/// `AsyncHTTPClientTransportTests` and `TransportWireSafetyTests`, which run on both.)
final class PooledHTTPTransportTests: XCTestCase {
    private var servers: [RawTCPServer] = []
    private var transports: [PooledHTTPTransport] = []
    private var receivers: [TLSReceiver] = []

    override func tearDown() async throws {
        for transport in transports { try await transport.shutdown() }
        for server in servers { try await server.stop() }
        for receiver in receivers { try await receiver.stop() }
    }

    private func server(_ script: RawTCPServer.Script) async throws -> RawTCPServer {
        let server = try await RawTCPServer.start(script: script)
        servers.append(server)
        return server
    }

    private func transport(_ change: (inout PooledHTTPTransport.Configuration) -> Void = { _ in }) -> PooledHTTPTransport {
        var configuration = PooledHTTPTransport.Configuration()
        configuration.totalTimeout = .seconds(5)
        configuration.connectTimeout = .seconds(2)
        change(&configuration)
        let transport = PooledHTTPTransport(configuration: configuration)
        transports.append(transport)
        return transport
    }

    /// A GET of `/hook` on `host` at the server's port, connected to 127.0.0.1.
    private static func pinned(_ host: String, _ server: RawTCPServer, scheme: String = "http") -> OutboundRequest {
        OutboundRequest(method: "GET", url: "\(scheme)://\(host):\(server.port)/hook", connectAddress: "127.0.0.1")
    }

    /// How many request heads `server` received.
    private static func requests(_ server: RawTCPServer) -> Int {
        String(decoding: server.received, as: UTF8.self).components(separatedBy: "GET /hook HTTP/1.1").count - 1
    }

    func testDefaultsAreTheDocumentedOnes() {
        let defaults = PooledHTTPTransport.Configuration()
        XCTAssertEqual(defaults.connectTimeout, .seconds(10))
        XCTAssertEqual(defaults.totalTimeout, .seconds(30))
        XCTAssertEqual(defaults.maximumExcerptBytes, 20_000)
        XCTAssertEqual(defaults.maximumConnections, 2_048)
        XCTAssertEqual(defaults.maximumConnectionsPerHost, 32)
        XCTAssertEqual(defaults.idleTimeout, .seconds(60))
    }

    func testKeepAliveReceiverGetsEveryRequestOnOneConnection() async throws {
        let server = try await server(.respondEach(RawTCPServer.keepAliveResponse))
        let transport = transport()
        for _ in 0..<5 {
            let response = try await transport.send(Self.pinned("hooks.invalid", server))
            XCTAssertEqual(response.status, 200)
        }
        XCTAssertEqual(server.connections, 1)
        XCTAssertEqual(Self.requests(server), 5)
        XCTAssertEqual(transport.connectionCounts.open, 1)
        XCTAssertEqual(transport.connectionCounts.idle, 1)
    }

    func testAConnectionIsReusedOnlyForTheSameNameAndAddress() async throws {
        let server = try await server(.respondEach(RawTCPServer.keepAliveResponse))
        let transport = transport()
        _ = try await transport.send(Self.pinned("a.invalid", server))
        _ = try await transport.send(Self.pinned("b.invalid", server))
        _ = try await transport.send(Self.pinned("a.invalid", server))
        XCTAssertEqual(server.connections, 2, "one connection per name, the first one reused")
    }

    func testBudgetIsHeldByClosingAnIdleConnectionNeverABusyOne() async throws {
        let a = try await server(.respondEach(RawTCPServer.keepAliveResponse))
        let c = try await server(.respondEach(RawTCPServer.keepAliveResponse))
        let body = Array("slow".utf8)
        // Answers trickle for about 0.3 s, then the connection is closed (connection: close).
        let slow = try await server(.trickle(RawTCPServer.responseHead(contentLength: body.count) + body, interval: 0.004))
        let transport = transport { $0.maximumConnections = 2 }
        _ = try await transport.send(Self.pinned("a.invalid", a))
        let slowRequest = Self.pinned("b.invalid", slow)
        let inFlight = Task { [transport] () async throws -> Int in try await transport.send(slowRequest).status }
        while slow.connections < 1 { try await Task.sleep(for: .milliseconds(5)) }
        XCTAssertEqual(transport.connectionCounts.open, 2)
        // A third host at the budget while b's answer is still coming: a's idle connection, the
        // only one that may go, makes room.
        _ = try await transport.send(Self.pinned("c.invalid", c))
        XCTAssertLessThanOrEqual(transport.connectionCounts.open, 2)
        let status = try await inFlight.value
        XCTAssertEqual(status, 200)
        _ = try await transport.send(Self.pinned("a.invalid", a))
        XCTAssertEqual(a.connections, 2, "a's connection was closed to make room for c")
        XCTAssertEqual(slow.connections, 1)
        XCTAssertEqual(c.connections, 1)
        XCTAssertEqual(Self.requests(a) + Self.requests(c), 3)
    }

    func testBudgetIsHeldWhileEveryConnectionIsBusyAndWaitingRequestsAllSucceed() async throws {
        let body = Array("slow".utf8)
        // Each answer trickles for about 0.3 s, then the connection is closed (connection: close).
        let slow = try await server(.trickle(RawTCPServer.responseHead(contentLength: body.count) + body, interval: 0.004))
        let transport = transport { $0.maximumConnections = 2 }
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for n in 0..<6 {
                group.addTask { try await transport.send(Self.pinned("h\(n).invalid", slow)).status }
            }
            var most = 0
            var sawWaiting = false
            while slow.connections < 6 || transport.connectionCounts.open > 0 {
                let counts = transport.connectionCounts
                most = max(most, counts.open)
                sawWaiting = sawWaiting || counts.waiting > 0
                try await Task.sleep(for: .milliseconds(5))
            }
            XCTAssertLessThanOrEqual(most, 2, "more connections than the budget")
            XCTAssertTrue(sawWaiting, "no request ever waited for a place")
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(statuses, Array(repeating: 200, count: 6))
        XCTAssertEqual(slow.connections, 6)
    }

    /// The deadline covers the wait for a place as well as the exchange: a request queued behind
    /// a budget that a silent receiver holds ends at its own deadline, leaves no waiter behind,
    /// and the place, once free, serves the next request.
    func testARequestWaitingForAPlaceIsCutOffAtItsDeadlineAndLeavesNoWaiter() async throws {
        let silent = try await server(.silent)
        let answering = try await server(.respondEach(RawTCPServer.responseHead(contentLength: 0)))
        let transport = transport { $0.maximumConnections = 1 }
        var holding = Self.pinned("held.invalid", silent)
        holding.timeout = .seconds(2)
        let held = Task { try await transport.send(holding) }
        while transport.connectionCounts.open < 1 || silent.connections < 1 {
            try await Task.sleep(for: .milliseconds(5))
        }
        var queued = Self.pinned("queued.invalid", answering)
        queued.timeout = .milliseconds(300)
        let started = ContinuousClock.now
        do {
            _ = try await transport.send(queued)
            XCTFail("a request with no place was answered")
        } catch let error as TransportError {
            XCTAssertEqual(error.kind, .readTimeout, "\(error)")
        }
        let waited = ContinuousClock.now - started
        XCTAssertGreaterThanOrEqual(waited, .milliseconds(250))
        XCTAssertLessThan(waited, .milliseconds(1_500), "the wait outlived its deadline")
        XCTAssertEqual(transport.connectionCounts.waiting, 0, "the cut-off request still waits")
        XCTAssertEqual(answering.connections, 0, "the cut-off request was sent later")
        // The held request ends at its own deadline, and its place serves the next request.
        do {
            _ = try await held.value
            XCTFail("the silent receiver answered")
        } catch let error as TransportError {
            XCTAssertEqual(error.kind, .readTimeout, "\(error)")
        }
        let next = try await transport.send(Self.pinned("next.invalid", answering))
        XCTAssertEqual(next.status, 200)
        XCTAssertEqual(transport.connectionCounts.waiting, 0)
    }

    func testTheAnswerToAHeadHasNoBodyWhateverItsLengthAndTheConnectionIsKept() async throws {
        // Every answer announces 5 bytes and sends none: right for a HEAD, which the response
        // decoder must know of, or it would wait for 5 bytes that never come.
        let server = try await server(.respondEach(Array("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n".utf8)))
        let transport = transport()
        for _ in 0..<3 {
            let response = try await transport.send(
                OutboundRequest(method: "HEAD", url: "http://head.invalid:\(server.port)/hook", connectAddress: "127.0.0.1"))
            XCTAssertEqual(response.status, 200)
            XCTAssertEqual(response.bodyExcerpt, [])
        }
        XCTAssertEqual(server.connections, 1, "one kept connection for every HEAD")
        XCTAssertEqual(
            String(decoding: server.received, as: UTF8.self).components(separatedBy: "HEAD /hook HTTP/1.1\r\n").count - 1, 3)
    }

    func testARequestThatAsksForConnectionCloseIsNotSentOnItsConnectionAgain() async throws {
        let server = try await server(.respondEach(RawTCPServer.keepAliveResponse))
        let transport = transport()
        for _ in 0..<2 {
            var request = Self.pinned("closing.invalid", server)
            request.headers.add("Connection", "close")
            let response = try await transport.send(request)
            XCTAssertEqual(response.status, 200)
        }
        XCTAssertEqual(server.connections, 2)
        XCTAssertEqual(Self.requests(server), 2)
    }

    func testReceiverThatDropsAnIdleConnectionAsTheRequestComesDoesNotFailIt() async throws {
        // Answers once per connection with keep-alive, then closes it on the next request
        // unanswered: the pooled connection is stale just as it is reused.
        let server = try await server(.respondOnceThenCloseOnNext(RawTCPServer.keepAliveResponse))
        let transport = transport()
        for _ in 0..<3 {
            let response = try await transport.send(Self.pinned("idle-closer.invalid", server))
            XCTAssertEqual(response.status, 200)
        }
        XCTAssertEqual(server.connections, 3, "each stale connection replaced by a new one")
        XCTAssertEqual(Self.requests(server), 5, "3 answered, 2 on stale connections sent again")
    }

    func testARequestThatWasAnsweredIsNeverSentAgain() async throws {
        // A reused connection whose server answers 503 and then closes: the answer stands.
        let head = Array("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n".utf8)
        let server = try await server(.respondEach(head))
        let transport = transport()
        for _ in 0..<2 {
            let response = try await transport.send(Self.pinned("busy.invalid", server))
            XCTAssertEqual(response.status, 503)
        }
        XCTAssertEqual(Self.requests(server), 2)
    }

    func testReceiverThatClosesIdleConnectionsAtOnceDoesNotFailTheNextRequest() async throws {
        let server = try await server(.respondThenClose(RawTCPServer.keepAliveResponse))
        let transport = transport()
        _ = try await transport.send(Self.pinned("closer.invalid", server))
        // The close is seen while the connection is idle: it leaves the pool.
        let dropped = await eventually { transport.connectionCounts.open == 0 }
        XCTAssertTrue(dropped, "a connection its server closed stayed in the pool")
        let response = try await transport.send(Self.pinned("closer.invalid", server))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(server.connections, 2)
        XCTAssertEqual(Self.requests(server), 2, "no request was lost or sent twice")
    }

    func testIdleConnectionsAreClosedAfterTheIdleTimeout() async throws {
        let server = try await server(.respondEach(RawTCPServer.keepAliveResponse))
        let transport = transport { $0.idleTimeout = .milliseconds(300) }
        _ = try await transport.send(Self.pinned("a.invalid", server))
        XCTAssertEqual(transport.connectionCounts.open, 1)
        let closed = await eventually(within: .seconds(5)) { transport.connectionCounts.open == 0 }
        XCTAssertTrue(closed, "the idle connection outlived its timeout")
    }

    // MARK: Large bodies

    /// Sends each of `bodies` to a sink on one transport and checks that each arrived as sent,
    /// over one connection kept throughout.
    private func assertBodiesArriveWholeOnOneConnection(_ bodies: [[UInt8]]) async throws {
        let received = ResultBox<[UInt8]>()
        let sink = try await HTTPSink.start { request in
            received.set(.success(request.body))
            return .respond(status: 200)
        }
        let transport = transport()
        for body in bodies {
            let response = try await transport.send(
                OutboundRequest(url: sink.baseURL + "/body", body: body, connectAddress: "127.0.0.1"))
            XCTAssertEqual(response.status, 200, "\(body.count) bytes")
            XCTAssertTrue(try received.get() == body, "\(body.count) bytes: the body arrived changed")
        }
        XCTAssertEqual(transport.connectionCounts.open, 1, "the connection is kept after whole bodies")
        await sink.shutdown()
    }

    func testOneMebibyteBodiesArriveWholeOnOneKeptConnection() async throws {
        try await assertBodiesArriveWholeOnOneConnection(
            (0..<3).map { n in (0..<1_048_576).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ n) } })
    }

    func testBodiesAroundOneSliceArriveWhole() async throws {
        // A body of at most one slice goes out in the head's write, a larger one in slices.
        try await assertBodiesArriveWholeOnOneConnection(
            [0, 1, 65_535, 65_536, 65_537, 3 * 65_536 + 7].map { size in
                (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ size) }
            })
    }

    func testAReceiverThatAnswersBeforeTheBodyIsInIsHeardAndItsConnectionNotReused() async throws {
        // The server answers as soon as the first bytes arrive and reads nothing more, so most
        // of a 32 MiB body can never go out: the answer counts, and the connection, whose
        // request was cut short, is closed rather than kept for the next one.
        let server = try await server(
            .respondThenStopReading(Array("HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\n\r\n".utf8)))
        let transport = transport()
        let body = [UInt8](repeating: 0x61, count: 32 * 1_048_576)
        for _ in 0..<2 {
            let response = try await transport.send(
                OutboundRequest(url: "http://early.invalid:\(server.port)/hook", body: body, connectAddress: "127.0.0.1"))
            XCTAssertEqual(response.status, 413)
        }
        XCTAssertEqual(server.connections, 2)
        XCTAssertLessThan(server.bytesReceived, 32 * 1_048_576, "the server stopped reading; the body cannot all be in")
    }

    // MARK: TLS

    func testALargeBodyGoesWholeOverTLS() async throws {
        let authority = try TestCertificateAuthority.make()
        let receiver = try await TLSReceiver.start(authority: authority)
        receivers.append(receiver)
        let transport = transport { $0.tlsConfiguration = authority.clientConfiguration }
        let url = "https://\(TestCertificateAuthority.serverName):\(receiver.port)/hook"
        let body = [UInt8](repeating: 0x7a, count: 1_048_576)
        for _ in 0..<2 {
            let response = try await transport.send(OutboundRequest(url: url, body: body, connectAddress: "127.0.0.1"))
            XCTAssertEqual(response.status, 200)
        }
        XCTAssertEqual(receiver.bodyBytes, 2 * 1_048_576)
        XCTAssertEqual(receiver.connections, 1)
    }

    func testTLSReceiverIsReachedByItsNameAtThePinnedAddressOverOneConnection() async throws {
        let authority = try TestCertificateAuthority.make()
        let receiver = try await TLSReceiver.start(authority: authority)
        receivers.append(receiver)
        let transport = transport { $0.tlsConfiguration = authority.clientConfiguration }
        let url = "https://\(TestCertificateAuthority.serverName):\(receiver.port)/hook"
        for _ in 0..<3 {
            let response = try await transport.send(OutboundRequest(url: url, body: Array("{}".utf8), connectAddress: "127.0.0.1"))
            XCTAssertEqual(response.status, 200)
            XCTAssertEqual(response.bodyExcerpt, Array("secure".utf8))
        }
        XCTAssertEqual(receiver.connections, 1, "keep-alive over TLS")
        XCTAssertEqual(receiver.requests, 3)
    }

    func testCertificateForAnotherNameIsATLSFailureAndNothingIsSent() async throws {
        let authority = try TestCertificateAuthority.make()
        let receiver = try await TLSReceiver.start(authority: authority)
        receivers.append(receiver)
        let transport = transport { $0.tlsConfiguration = authority.clientConfiguration }
        // The address serves receiver.test's certificate; the URL names another host.
        let request = OutboundRequest(url: "https://other.test:\(receiver.port)/hook", connectAddress: "127.0.0.1")
        do {
            let response = try await transport.send(request)
            XCTFail("expected a TLS failure, got \(response.status)")
        } catch let error as TransportError {
            XCTAssertEqual(error.kind, .tlsFailure, "\(error)")
        }
        XCTAssertEqual(receiver.requests, 0)
    }

    func testCertificateOfAnUntrustedAuthorityIsATLSFailure() async throws {
        let authority = try TestCertificateAuthority.make()
        let receiver = try await TLSReceiver.start(authority: authority)
        receivers.append(receiver)
        // The system trust roots do not know the test CA.
        let transport = transport()
        let url = "https://\(TestCertificateAuthority.serverName):\(receiver.port)/hook"
        do {
            let response = try await transport.send(OutboundRequest(url: url, connectAddress: "127.0.0.1"))
            XCTFail("expected a TLS failure, got \(response.status)")
        } catch let error as TransportError {
            XCTAssertEqual(error.kind, .tlsFailure, "\(error)")
        }
        XCTAssertEqual(receiver.requests, 0)
    }

    /// Trust roots that cannot be loaded do not stop the transport: its TLS context is made at
    /// the first `https` connection, so plain HTTP works and every `https` request fails the
    /// same way, with the reason.
    func testUnreadableTrustRootsFailEveryHTTPSRequestAndNoPlainOne() async throws {
        let transport = transport { $0.additionalTrustRootFiles = ["/nonexistent/courier-ca.pem"] }
        XCTAssertEqual(
            PooledHTTPTransport.tlsProblem(in: transport.configuration), "cannot read /nonexistent/courier-ca.pem")
        let plain = try await server(.respondEach(RawTCPServer.keepAliveResponse))
        let response = try await transport.send(Self.pinned("receiver.localhost", plain))
        XCTAssertEqual(response.status, 200)
        for _ in 0..<2 {
            do {
                let response = try await transport.send(Self.pinned("receiver.localhost", plain, scheme: "https"))
                XCTFail("expected a TLS failure, got \(response.status)")
            } catch let error as TransportError {
                XCTAssertEqual(error.kind, .tlsFailure, "\(error)")
                XCTAssertTrue(error.message.contains("cannot read /nonexistent/courier-ca.pem"), error.message)
            }
        }
        XCTAssertEqual(Self.requests(plain), 1, "no https request reached the plain server")
    }
}
