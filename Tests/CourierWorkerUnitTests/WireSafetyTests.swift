import CourierCore
import CourierTesting
import CourierWorker
import Foundation
import Logging
import RetryClient
import XCTest

/// `HTTPDeliverer` against hostile rows and lying DNS, with counting servers on 127.0.0.1:
/// nothing malformed reaches the wire, the connection goes only to the address that was
/// checked, and one deadline bounds the whole request.
final class WireSafetyTests: XCTestCase {
    private var servers: [RawTCPServer] = []
    private var deliverers: [HTTPDeliverer] = []
    private var transports: [PooledHTTPTransport] = []

    override func tearDown() async throws {
        for deliverer in deliverers { deliverer.shutdown() }
        for transport in transports { try await transport.shutdown() }
        for server in servers { try await server.stop() }
    }

    private func server(_ script: RawTCPServer.Script) async throws -> RawTCPServer {
        let server = try await RawTCPServer.start(script: script)
        servers.append(server)
        return server
    }

    private func configuration(
        allowPrivate: Bool, resolver: any HostResolver = SystemResolver()
    ) -> HTTPDelivererConfiguration {
        var configuration = HTTPDelivererConfiguration()
        configuration.allowPrivateTargets = allowPrivate
        configuration.totalTimeout = .seconds(2)
        configuration.connectTimeout = .seconds(1)
        configuration.quickRetryDelay = .milliseconds(10)
        configuration.resolver = resolver
        return configuration
    }

    private func deliverer(_ configuration: HTTPDelivererConfiguration) -> HTTPDeliverer {
        let deliverer = HTTPDeliverer(configuration: configuration, logger: Self.logger)
        deliverers.append(deliverer)
        return deliverer
    }

    private static var logger: Logger {
        var logger = Logger(label: "test.wire")
        logger.logLevel = .critical
        return logger
    }

    private static func job(
        method: String = "POST", url: String, headers: [(String, String)] = [], attempt: Int = 1
    ) -> ClaimedJob {
        ClaimedJob(
            id: 7, queue: "wire", method: method, url: url, headers: headers, body: Array("{}".utf8),
            attempt: attempt, maxAttempts: 5, schedule: .standardWebhooks, signingSecret: nil, queueMaxInFlight: nil)
    }

    /// The error of a delivery that sent nothing and is final (no status, verdict `dead`).
    private static func permanentError(_ delivery: Delivery) -> String? {
        delivery.status == nil && delivery.verdict.durable == .dead ? delivery.error : nil
    }

    // MARK: nothing malformed reaches the wire

    func testMalformedJobsGoDeadWithoutAByteReachingTheReceiver() async throws {
        let server = try await server(.respond(RawTCPServer.responseHead(contentLength: 0)))
        let base = "http://127.0.0.1:\(server.port)"
        let deliverer = deliverer(configuration(allowPrivate: true))
        let cases: [(String, ClaimedJob, String)] = [
            ("port 99999", Self.job(url: "http://127.0.0.1:99999/hook"), "port"),
            ("port 0", Self.job(url: "http://127.0.0.1:0/hook"), "port"),
            ("non-ASCII header name", Self.job(url: base + "/", headers: [("X-Ünï", "v")]), "header name"),
            ("smuggled request in the method",
             Self.job(method: "GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST /EVIL", url: base + "/"), "method"),
            ("smuggled request in a header value",
             Self.job(url: base + "/", headers: [("X-A", "1\r\n\r\nPOST /EVIL HTTP/1.1\r\nHost: x")]), "X-A"),
            ("LF in a header value", Self.job(url: base + "/", headers: [("X-A", "1\nX-B: 2")]), "X-A"),
            ("NUL in a header value", Self.job(url: base + "/", headers: [("X-A", "1\u{0}")]), "X-A"),
            ("CR LF in the URL", Self.job(url: base + "/a\r\nX-Evil: 1"), "url"),
            ("space in the URL", Self.job(url: base + "/a b"), "url"),
            ("ftp URL", Self.job(url: "ftp://127.0.0.1/x"), "scheme"),
        ]
        for (name, job, mention) in cases {
            let report = await deliverer.deliver(job)
            let error = Self.permanentError(report)
            XCTAssertNotNil(error, "\(name): \(report)")
            XCTAssertTrue(error?.hasPrefix("invalid request: ") ?? false, "\(name): \(String(describing: error))")
            XCTAssertTrue(error?.contains(mention) ?? false, "\(name): \(String(describing: error))")
            XCTAssertFalse(error?.contains("\r") ?? true, "\(name): the error echoes a CR")
            XCTAssertFalse(error?.contains("\n") ?? true, "\(name): the error echoes a LF")
        }
        XCTAssertEqual(server.connections, 0, "a malformed job reached the receiver")
        XCTAssertEqual(server.bytesReceived, 0)
        // The receiver was there all along: a valid job reaches it.
        let report = await deliverer.deliver(Self.job(url: base + "/"))
        XCTAssertEqual(report.verdict.durable, .succeed)
        XCTAssertEqual(report.status, 200)
        XCTAssertEqual(server.connections, 1)
    }

    func testMalformedJobsAreRefusedWhenPrivateTargetsAreRefusedToo() async throws {
        let resolver = ScriptedResolver(answers: [["93.184.216.34"]])
        let guardTransport = LoopbackOnlyTransport(inner: nil)
        let deliverer = HTTPDeliverer(
            configuration: configuration(allowPrivate: false, resolver: resolver), transport: guardTransport,
            logger: Self.logger)
        let report = await deliverer.deliver(Self.job(url: "http://example.invalid:99999/"))
        XCTAssertTrue(Self.permanentError(report)?.contains("port") ?? false, "\(report)")
        XCTAssertEqual(resolver.calls, 0, "a malformed URL was resolved")
        XCTAssertEqual(guardTransport.requests.count, 0)
    }

    // MARK: DNS rebinding

    func testRebindingResolverCannotSteerTheConnectionToLoopback() async throws {
        let receiver = try await server(.respond(RawTCPServer.responseHead(contentLength: 0)))
        // First answer public, every later one loopback: a second lookup would reach the receiver.
        let resolver = ScriptedResolver(answers: [["93.184.216.34"], ["127.0.0.1"]])
        let real = PooledHTTPTransport()
        transports.append(real)
        let transport = LoopbackOnlyTransport(inner: real)
        let deliverer = HTTPDeliverer(
            configuration: configuration(allowPrivate: false, resolver: resolver), transport: transport,
            logger: Self.logger)
        let url = "http://rebind.invalid:\(receiver.port)/hook"

        let first = await deliverer.deliver(Self.job(url: url))
        XCTAssertEqual(first.verdict, DeliveryPolicy.verdict(for: .transport(.connectRefused)), "\(first)")
        XCTAssertNil(first.status)
        XCTAssertEqual(first.error, "connection refused")
        // One lookup for the attempt and its in-process retries; every send pinned to the
        // checked public address, the URL (Host, SNI) untouched.
        XCTAssertEqual(resolver.calls, 1)
        XCTAssertEqual(transport.requests.count, 3, "the attempt and its two quick retries")
        XCTAssertEqual(Set(transport.requests.map(\.connectAddress)), ["93.184.216.34"])
        XCTAssertEqual(Set(transport.requests.map(\.url)), [url])

        // The next attempt resolves afresh, sees loopback, and refuses before any send.
        let second = await deliverer.deliver(Self.job(url: url, attempt: 2))
        let refusal = Self.permanentError(second)
        XCTAssertEqual(
            refusal,
            "refused private target: rebind.invalid resolves to 127.0.0.1 (allow with --allow-private-targets)")
        XCTAssertEqual(resolver.calls, 2)
        XCTAssertEqual(transport.requests.count, 3)

        XCTAssertEqual(receiver.connections, 0, "a connection reached loopback")
        XCTAssertEqual(transport.forwarded, 0)
    }

    func testAnyNonGlobalAnswerAmongSeveralRefusesTheTarget() async throws {
        let cases: [[String]] = [
            ["93.184.216.34", "127.0.0.1"], ["127.0.0.1", "93.184.216.34"], ["2606:2800:220:1::1", "::1"],
            ["93.184.216.34", "::ffff:10.0.0.1"], ["2002:a00:1::1"], ["fec0::1"], ["::192.168.0.1"],
            ["64:ff9b:1::1"], ["2001:0:5db8:d822::80ff:fffe"], ["169.254.169.254"],
        ]
        for answer in cases {
            let resolver = ScriptedResolver(answers: [answer])
            let transport = LoopbackOnlyTransport(inner: nil)
            let deliverer = HTTPDeliverer(
                configuration: configuration(allowPrivate: false, resolver: resolver), transport: transport,
                logger: Self.logger)
            let report = await deliverer.deliver(Self.job(url: "https://hooks.invalid/x"))
            XCTAssertTrue(
                Self.permanentError(report)?.hasPrefix("refused private target: hooks.invalid resolves to ") ?? false,
                "\(answer): \(report)")
            XCTAssertEqual(transport.requests.count, 0, "\(answer)")
        }
    }

    func testLiteralTargetsAreCheckedWithoutDNS() async throws {
        let resolver = ScriptedResolver(answers: [])
        let transport = LoopbackOnlyTransport(inner: nil)
        let deliverer = HTTPDeliverer(
            configuration: configuration(allowPrivate: false, resolver: resolver), transport: transport,
            logger: Self.logger)
        for url in ["http://127.0.0.1:1/", "http://[::1]:1/", "http://[::ffff:127.0.0.1]/", "http://10.0.0.1/"] {
            let report = await deliverer.deliver(Self.job(url: url))
            let error = Self.permanentError(report)
            XCTAssertTrue(error?.hasPrefix("refused private target") ?? false, "\(url): \(report)")
        }
        XCTAssertEqual(transport.requests.count, 0)
        // A global literal is sent as it is: no lookup, no pin needed.
        _ = await deliverer.deliver(Self.job(url: "http://93.184.216.34/"))
        XCTAssertFalse(transport.requests.isEmpty)
        XCTAssertTrue(transport.requests.allSatisfy { $0.connectAddress == nil && $0.url == "http://93.184.216.34/" })
        XCTAssertEqual(resolver.calls, 0)
    }

    func testDNSFailureIsRetryable() async throws {
        let resolver = ScriptedResolver(answers: [])
        let deliverer = HTTPDeliverer(
            configuration: configuration(allowPrivate: false, resolver: resolver),
            transport: LoopbackOnlyTransport(inner: nil), logger: Self.logger)
        let report = await deliverer.deliver(Self.job(url: "http://nowhere.invalid/"))
        XCTAssertEqual(report.verdict.durable, .retryLater, "\(report)")
        XCTAssertNil(report.status)
        XCTAssertNil(report.retryAfter)
        XCTAssertTrue(report.error?.contains("nowhere.invalid") ?? false, "\(report)")
    }

    func testAllowedPrivateTargetsSkipTheLookup() async throws {
        let receiver = try await server(.respond(RawTCPServer.responseHead(contentLength: 0)))
        let resolver = ScriptedResolver(answers: [])
        let deliverer = deliverer(configuration(allowPrivate: true, resolver: resolver))
        let report = await deliverer.deliver(Self.job(url: "http://localhost:\(receiver.port)/"))
        XCTAssertEqual(report.verdict.durable, .succeed)
        XCTAssertEqual(report.status, 200)
        XCTAssertEqual(resolver.calls, 0)
    }

    // MARK: one deadline

    func testTricklingReceiverIsSettledWithinTheTotalTimeout() async throws {
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 200)
        let receiver = try await server(
            .trickleBody(head: RawTCPServer.responseHead(contentLength: body.count), body: body, interval: 1))
        let deliverer = deliverer(configuration(allowPrivate: true))
        let start = ContinuousClock.now
        let report = await deliverer.deliver(Self.job(url: "http://127.0.0.1:\(receiver.port)/"))
        let elapsed = ContinuousClock.now - start
        XCTAssertEqual(report, .failure(.transport(.readTimeout), error: "timeout after 2 s"))
        XCTAssertLessThan(elapsed, .seconds(4), "took \(elapsed)")
    }
}

/// Answers lookups from a script: answer N for call N, the last one repeated; no answers at
/// all means every lookup fails.
private final class ScriptedResolver: HostResolver, @unchecked Sendable {
    private let answers: [[String]]
    private let lock = NSLock()
    // Guarded by `lock`.
    private var count = 0

    init(answers: [[String]]) {
        self.answers = answers
    }

    var calls: Int { lock.withLock { count } }

    func resolve(_ host: String) async throws -> [IPAddress] {
        let index = lock.withLock {
            count += 1
            return count - 1
        }
        guard let answer = answers.isEmpty ? nil : answers[min(index, answers.count - 1)] else {
            throw TargetError(message: "DNS lookup of \(host) failed: scripted failure")
        }
        return answer.compactMap(IPAddress.init)
    }
}

/// Records every request; forwards to the real transport only those pinned to loopback or
/// without a pin to a loopback URL, and refuses the rest as if nothing listened, so no test
/// ever opens a connection beyond this machine.
private final class LoopbackOnlyTransport: HTTPTransport, @unchecked Sendable {
    private let inner: PooledHTTPTransport?
    private let lock = NSLock()
    // Guarded by `lock`.
    private var seen: [OutboundRequest] = []
    private var forwardedCount = 0

    init(inner: PooledHTTPTransport?) {
        self.inner = inner
    }

    var requests: [OutboundRequest] { lock.withLock { seen } }
    var forwarded: Int { lock.withLock { forwardedCount } }

    func send(_ request: OutboundRequest) async throws -> HTTPResponseSummary {
        lock.withLock { seen.append(request) }
        let target = request.connectAddress ?? URL(string: request.url)?.host ?? ""
        guard let inner, let address = IPAddress(target), address.bytes.first == 127 else {
            throw TransportError(kind: .connectRefused, message: "test transport: refusing to leave the machine")
        }
        lock.withLock { forwardedCount += 1 }
        return try await inner.send(request)
    }
}
