import CourierTesting
import Foundation
import RetryClient
import XCTest

/// What the production transports (`AsyncHTTPClientTransport`, `PooledHTTPTransport`) refuse
/// to write, the one deadline over a whole request, and connections pinned to a checked
/// address, against real servers on 127.0.0.1. The shared guarantees run once per transport.
final class TransportWireSafetyTests: XCTestCase {
    private var servers: [RawTCPServer] = []
    private var transport: (any ProductionTransport)!
    private var extraTransports: [any ProductionTransport] = []

    override func tearDown() async throws {
        for extra in extraTransports { try await extra.shutdown() }
        for server in servers { try await server.stop() }
        servers = []
    }

    /// Runs `body` once per transport kind (total timeout 2 s, connect 1 s) as `transport`;
    /// servers started inside belong to that run.
    private func forEachTransport(_ body: (TransportKind) async throws -> Void) async throws {
        for kind in TransportKind.allCases {
            transport = kind.make(totalTimeout: .seconds(2), connectTimeout: .seconds(1))
            extraTransports.append(transport)
            do {
                try await body(kind)
            } catch {
                XCTFail("\(kind): \(error)")
            }
        }
    }

    private func server(_ script: RawTCPServer.Script) async throws -> RawTCPServer {
        let server = try await RawTCPServer.start(script: script)
        servers.append(server)
        return server
    }

    private func sendExpectingError(_ request: OutboundRequest) async -> TransportError? {
        do {
            let response = try await transport.send(request)
            XCTFail("\(transport!): expected an error, got \(response.status)")
            return nil
        } catch let error as TransportError {
            return error
        } catch {
            XCTFail("not a TransportError: \(error)")
            return nil
        }
    }

    // MARK: refused before the wire

    func testRequestsThatWouldCrashOrSmuggleAreRefusedWithoutAByteSent() async throws {
        try await forEachTransport { _ in
            let server = try await server(.respond(RawTCPServer.responseHead(contentLength: 0)))
            let base = "http://127.0.0.1:\(server.port)"
            let requests: [(String, OutboundRequest)] = [
                ("port 99999 (crashed NIO with SIGILL)", OutboundRequest(method: "GET", url: "http://127.0.0.1:99999/")),
                ("port 0", OutboundRequest(method: "GET", url: "http://127.0.0.1:0/")),
                ("port 65536", OutboundRequest(method: "GET", url: "http://localhost:65536/")),
                ("non-ASCII header name (NIO precondition)",
                 OutboundRequest(method: "GET", url: base + "/", headers: ["X-Ünï": "v"])),
                ("CR LF in the method",
                 OutboundRequest(method: "GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST /EVIL", url: base + "/")),
                ("CR LF in a header value",
                 OutboundRequest(method: "POST", url: base + "/", headers: ["X-A": "1\r\n\r\nPOST /EVIL HTTP/1.1"])),
                ("LF in a header value", OutboundRequest(url: base + "/", headers: ["X-A": "1\nX-B: 2"])),
                ("NUL in a header value", OutboundRequest(url: base + "/", headers: ["X-A": "1\u{0}2"])),
                ("CR LF in the URL", OutboundRequest(url: base + "/a\r\nX-Evil: 1")),
                ("space in the URL", OutboundRequest(url: base + "/a b")),
                ("a host name as connect address", OutboundRequest(url: base + "/", connectAddress: "localhost")),
            ]
            for (name, request) in requests {
                let error = await sendExpectingError(request)
                XCTAssertEqual(error?.kind, .invalidRequest, "\(name): \(String(describing: error))")
                XCTAssertTrue(
                    error?.message.hasPrefix("invalid request: ") ?? false, "\(name): \(String(describing: error))")
            }
            // The server would answer anything; nothing reached it.
            XCTAssertEqual(server.connections, 0)
            XCTAssertEqual(server.bytesReceived, 0)
            // A valid request to the same server goes through, so the server was reachable.
            let response = try await transport.send(OutboundRequest(method: "GET", url: base + "/"))
            XCTAssertEqual(response.status, 200)
            XCTAssertEqual(server.connections, 1)
        }
    }

    // MARK: one deadline

    func testBodyTrickledOneBytePerSecondIsCutOffAtTheTotalTimeout() async throws {
        try await forEachTransport { _ in
            let body = [UInt8](repeating: UInt8(ascii: "x"), count: 100)
            let server = try await server(
                .trickleBody(head: RawTCPServer.responseHead(contentLength: body.count), body: body, interval: 1))
            try await assertTimesOut(OutboundRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/"))
        }
    }

    func testSilentServerIsCutOffAtTheTotalTimeout() async throws {
        try await forEachTransport { _ in
            let server = try await server(.silent)
            try await assertTimesOut(OutboundRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/"))
        }
    }

    func testHeadTrickledOneBytePerSecondIsCutOffAtTheTotalTimeout() async throws {
        try await forEachTransport { _ in
            let head = RawTCPServer.responseHead(contentLength: 0)
            let server = try await server(.trickle(head + head + head, interval: 0.5))
            try await assertTimesOut(OutboundRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/"))
        }
    }

    func testPerRequestTimeoutIsTheDeadline() async throws {
        try await forEachTransport { _ in
            let body = [UInt8](repeating: UInt8(ascii: "x"), count: 100)
            let server = try await server(
                .trickleBody(head: RawTCPServer.responseHead(contentLength: body.count), body: body, interval: 0.2))
            let request = OutboundRequest(
                method: "GET", url: "http://127.0.0.1:\(server.port)/", timeout: .milliseconds(700))
            let start = ContinuousClock.now
            let error = await sendExpectingError(request)
            XCTAssertEqual(error?.kind, .readTimeout, "\(String(describing: error))")
            XCTAssertLessThan(ContinuousClock.now - start, .milliseconds(1_700))
        }
    }

    func testFastTrickleWithinTheDeadlineStillSucceeds() async throws {
        try await forEachTransport { _ in
            let body = Array("hello".utf8)
            let server = try await server(
                .trickleBody(head: RawTCPServer.responseHead(contentLength: body.count), body: body, interval: 0.05))
            let response = try await transport.send(OutboundRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/"))
            XCTAssertEqual(response.status, 200)
            XCTAssertEqual(response.bodyExcerpt, body)
        }
    }

    private func assertTimesOut(
        _ request: OutboundRequest, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let start = ContinuousClock.now
        let error = await sendExpectingError(request)
        let elapsed = ContinuousClock.now - start
        XCTAssertEqual(error?.kind, .readTimeout, "\(String(describing: error))", file: file, line: line)
        // totalTimeout is 2 s; the old behaviour read the trickle for 100 s.
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(1_900), file: file, line: line)
        XCTAssertLessThan(elapsed, .milliseconds(3_500), "took \(elapsed)", file: file, line: line)
    }

    // MARK: pinned address

    func testPinnedAddressIsConnectedWhileHostHeaderKeepsTheName() async throws {
        try await forEachTransport { _ in
            let server = try await server(.respond(RawTCPServer.responseHead(contentLength: 0)))
            // `.invalid` never resolves (RFC 6761): only the pin can have made the connection.
            let request = OutboundRequest(
                method: "GET", url: "http://pinned.invalid:\(server.port)/hook", connectAddress: "127.0.0.1")
            let response = try await transport.send(request)
            XCTAssertEqual(response.status, 200)
            XCTAssertEqual(server.connections, 1)
            // The same pair reuses its client.
            _ = try await transport.send(request)
            if let client = transport as? AsyncHTTPClientTransport { XCTAssertEqual(client.pinnedClientCount, 1) }
        }
    }

    func testPinnedAddressWinsOverTheNamesOwnResolution() async throws {
        try await forEachTransport { _ in
            let server = try await server(.respond(RawTCPServer.responseHead(contentLength: 0)))
            // `localhost` resolves to the server's 127.0.0.1, but the pin says 127.0.0.2, where
            // nothing listens on that port: the connection must go to the pin and be refused.
            let request = OutboundRequest(
                method: "GET", url: "http://localhost:\(server.port)/", connectAddress: "127.0.0.2")
            let error = await sendExpectingError(request)
            XCTAssertEqual(error?.kind, .connectRefused, "\(String(describing: error))")
            XCTAssertEqual(server.connections, 0)
        }
    }

    func testHostHeaderCarriesTheURLHostNotThePinnedAddress() async throws {
        try await forEachTransport { _ in
            let recorder = try await LoopbackServer.start()
            defer { Task { try? await recorder.stop() } }
            let request = OutboundRequest(
                method: "GET", url: "http://receiver.invalid:\(recorder.port)/ok", connectAddress: "127.0.0.1")
            let response = try await transport.send(request)
            XCTAssertEqual(response.status, 200)
            XCTAssertEqual(recorder.hosts, ["receiver.invalid:\(recorder.port)"])
        }
    }

    func testPinnedHTTPSKeepsTheURLHostAsTLSServerName() async throws {
        try await forEachTransport { _ in
            // The server speaks no TLS: it only records the ClientHello, whose SNI is plain text.
            let server = try await server(.silent)
            let request = OutboundRequest(
                method: "GET", url: "https://sni-check.invalid:\(server.port)/", connectAddress: "127.0.0.1")
            let error = await sendExpectingError(request)
            XCTAssertNotNil(error)
            XCTAssertEqual(server.connections, 1)
            let hello = server.received
            XCTAssertEqual(hello.first, 0x16, "a TLS handshake record")
            let name = Array("sni-check.invalid".utf8)
            XCTAssertTrue(
                hello.indices.contains { hello[$0...].starts(with: name) }, "the ClientHello names the URL's host")
            XCTAssertFalse(
                hello.indices.contains { hello[$0...].starts(with: Array("127.0.0.1".utf8)) }, "no SNI of the address")
        }
    }

    func testPinnedClientsAreBounded() async throws {
        var configuration = AsyncHTTPClientTransport.Configuration()
        configuration.maximumPinnedClients = 2
        let small = AsyncHTTPClientTransport(configuration: configuration)
        extraTransports.append(small as any ProductionTransport)
        let server = try await server(.respond(RawTCPServer.responseHead(contentLength: 0)))
        for name in ["a", "b", "c", "d"] {
            let request = OutboundRequest(
                method: "GET", url: "http://\(name).invalid:\(server.port)/", connectAddress: "127.0.0.1")
            let response = try await small.send(request)
            XCTAssertEqual(response.status, 200)
            XCTAssertLessThanOrEqual(small.pinnedClientCount, 2)
        }
    }

    func testEvictedPinnedClientFinishesItsRequestInFlight() async throws {
        var configuration = AsyncHTTPClientTransport.Configuration()
        configuration.maximumPinnedClients = 1
        configuration.totalTimeout = .seconds(5)
        let small = AsyncHTTPClientTransport(configuration: configuration)
        extraTransports.append(small as any ProductionTransport)
        let body = Array("slow answer".utf8)
        // About 0.5 s to answer once asked.
        let slow = try await server(
            .trickle(RawTCPServer.responseHead(contentLength: body.count) + body, interval: 0.007))
        let fast = try await server(.respond(RawTCPServer.responseHead(contentLength: 0)))
        async let first = small.send(
            OutboundRequest(method: "GET", url: "http://a.invalid:\(slow.port)/", connectAddress: "127.0.0.1"))
        // Once the slow server has the request, the first client is mid-request (its answer
        // trickles for about 0.5 s): the second pair evicts it then.
        let arrived = await eventually { slow.bytesReceived > 0 }
        XCTAssertTrue(arrived, "the first request never reached its server")
        let second = try await small.send(
            OutboundRequest(method: "GET", url: "http://b.invalid:\(fast.port)/", connectAddress: "127.0.0.1"))
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(small.pinnedClientCount, 1)
        let answer = try await first
        XCTAssertEqual(answer.status, 200, "the evicted client was shut down under its request")
        XCTAssertEqual(answer.bodyExcerpt, body)
    }
}
