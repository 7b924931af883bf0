import CourierCore
import CourierSink
import CourierTesting
import Foundation
import Postgres
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// OAuth2 client credentials per queue, end to end: `courier queues set --oauth-*`, a real
/// `courier worker` process, a real token server and a real protected receiver on 127.0.0.1.
final class OAuthWorkerTests: WorkerTestCase {
    private let clientID = "courier-client"
    private let secret = "s3cr3t-Tok3n-Value-never-print"

    override func setUp() async throws {
        url = try TestDatabase.shared(label: "oauthworkers")
        probe = try JobsProbe(url: url)
        queue = "o\(UInt32.random(in: 0...UInt32.max))"
        try probe.forgetDestinations()
    }

    /// A token server: checks HTTP Basic `clientID:secret` and the form, answers `tok-N` (N
    /// counting its token requests) after `delay` seconds; a wrong secret gets 401
    /// `invalid_client` as RFC 6749 §5.2 says.
    private func startTokenServer(delay: Double = 0) async throws -> (HTTPSink, TokenLog) {
        let tokens = TokenLog()
        let expected = "Basic " + Data("\(clientID):\(secret)".utf8).base64EncodedString()
        let sink = try await HTTPSink.start { request in
            let number = tokens.record(request)
            if delay > 0 { try? await Task.sleep(nanoseconds: UInt64(delay * 1e9)) }
            let form = String(decoding: request.body, as: UTF8.self)
            guard request.header("authorization") == expected else {
                return .respond(
                    status: 401, headers: [("Content-Type", "application/json")],
                    body: Array(#"{"error":"invalid_client","error_description":"bad client credentials"}"#.utf8))
            }
            guard request.method == "POST", form.hasPrefix("grant_type=client_credentials") else {
                return .respond(status: 400, body: Array(#"{"error":"invalid_request"}"#.utf8))
            }
            return .respond(
                status: 200, headers: [("Content-Type", "application/json")],
                body: Array(#"{"access_token":"tok-\#(number)","token_type":"Bearer","expires_in":3600}"#.utf8))
        }
        sinks.append(sink)
        return (sink, tokens)
    }

    /// A receiver that accepts only `Bearer <token>` for the tokens in `valid`.
    private func startReceiver(valid: TokenSet, hold: Double = 0) async throws -> HTTPSink {
        let log = self.log
        let sink = try await HTTPSink.start { request in
            log.record(request, key: request.header("authorization") ?? "none")
            log.begin("all")
            defer { log.end("all") }
            if hold > 0 { try? await Task.sleep(nanoseconds: UInt64(hold * 1e9)) }
            guard let header = request.header("authorization"), header.hasPrefix("Bearer "),
                valid.contains(String(header.dropFirst(7)))
            else { return .respond(status: 401) }
            return .respond(status: 200)
        }
        sinks.append(sink)
        return sink
    }

    private func setOAuth(tokenURL: String, secret: String? = nil) throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("oauth-\(UUID().uuidString)")
        try Data(((secret ?? self.secret) + "\n").utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try CourierRunner.run(
            ["queues", "set", queue, "--create", "--oauth-token-url", tokenURL, "--oauth-client-id", clientID,
             "--oauth-client-secret-file", file.path, "--oauth-scope", "hooks.write"],
            databaseURL: url)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertFalse(result.stdout.contains(secret ?? self.secret), result.stdout)
    }

    func testTwoHundredConcurrentDeliveriesCauseExactlyOneTokenRequest() async throws {
        // The token answer takes a while, so every delivery of both claims asks while the
        // first fetch is still running.
        let (tokenServer, tokens) = try await startTokenServer(delay: 1)
        let receiver = try await startReceiver(valid: TokenSet(["tok-1"]), hold: 0.5)
        try setOAuth(tokenURL: tokenServer.baseURL + "/oauth/token")
        for _ in 0..<200 { try probe.enqueue(url: receiver.baseURL + "/hook", queue: queue) }
        _ = try startWorkerProcess(["--concurrency", "200"])
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(60)))
        XCTAssertEqual(try probe.states(queue: queue), ["succeeded": 200])
        XCTAssertEqual(tokens.count, 1, "one token request for all deliveries")
        XCTAssertEqual(log.counts["Bearer tok-1"], 200)
        XCTAssertNil(log.counts["none"], "a request went out without a token")
        XCTAssertGreaterThanOrEqual(log.maxOverlap, 100, "the deliveries did not run concurrently; the test proves nothing")
        let form = String(decoding: tokens.all.first?.body ?? [], as: UTF8.self)
        XCTAssertEqual(form, "grant_type=client_credentials&scope=hooks.write")
    }

    func testRejectedTokenCausesOneRefreshAndOneRetry() async throws {
        let (tokenServer, tokens) = try await startTokenServer()
        let valid = TokenSet(["tok-1"])
        let receiver = try await startReceiver(valid: valid)
        try setOAuth(tokenURL: tokenServer.baseURL + "/token")
        _ = try startWorkerProcess()
        let first = try probe.enqueue(url: receiver.baseURL + "/a", queue: queue)
        XCTAssertTrue(try waitFor(30) { try probe.job(first).state == "succeeded" })
        XCTAssertEqual(tokens.count, 1)
        // The receiver stops accepting the token the worker holds (it expired early, or was
        // revoked): the next delivery meets a 401.
        valid.replace(with: ["tok-2"])
        let second = try probe.enqueue(url: receiver.baseURL + "/b", queue: queue)
        XCTAssertTrue(try waitFor(30) { try probe.job(second).state == "succeeded" })
        XCTAssertEqual(tokens.count, 2, "exactly one refresh")
        let toB = log.all.filter { $0.path == "/b" }.map { $0.header("authorization") ?? "none" }
        XCTAssertEqual(toB, ["Bearer tok-1", "Bearer tok-2"], "one 401, then exactly one retry with the new token")
        let job = try probe.job(second)
        XCTAssertEqual(job.attempt, 1, "the retry belongs to the same attempt")
        XCTAssertEqual(job.lastStatus, 200)
        // Both requests are in the history: the 401 as an in-process repeat of attempt 1.
        let rows = try probe.connection.query(
            "SELECT attempt, status, in_process FROM courier.attempts WHERE job_id = $1 ORDER BY id", [second]).rows
        XCTAssertEqual(try rows.map { try $0.decode(0, as: Int.self) }, [1, 1])
        XCTAssertEqual(try rows.map { try $0.decode(1, as: Int?.self) }, [401, 200])
        XCTAssertEqual(try rows.map { try $0.decode(2, as: Bool.self) }, [true, false])
    }

    func testWrongSecretEndsDeadWithAClearErrorAndTheSecretAppearsNowhere() async throws {
        let (tokenServer, tokens) = try await startTokenServer()
        let receiver = try await startReceiver(valid: TokenSet(["tok-1"]))
        let wrong = "Wr0ng-S3cret-do-not-leak"
        let tokenURL = tokenServer.baseURL + "/token"
        try setOAuth(tokenURL: tokenURL, secret: wrong)
        let ids = try (0..<3).map { _ in try probe.enqueue(url: receiver.baseURL + "/hook", queue: queue, maxAttempts: 5) }
        let (worker, stderr) = try startWorkerProcess(["--log-level", "debug"])
        // Read the log as it comes, so a full pipe never blocks the worker.
        let collected = Collected()
        let reader = Thread { collected.set(stderr.fileHandleForReading.readDataToEndOfFile()) }
        reader.start()
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(30)))
        for id in ids {
            let job = try probe.job(id)
            XCTAssertEqual(job.state, "dead")
            XCTAssertEqual(job.attempt, 1, "rejected credentials are not retried")
            XCTAssertEqual(job.lastError, "oauth token request to \(tokenURL) failed: 401 invalid_client")
        }
        XCTAssertGreaterThanOrEqual(tokens.count, 1)
        XCTAssertTrue(log.all.isEmpty, "nothing was sent to the receiver without a token")
        kill(worker.processIdentifier, SIGTERM)
        waitForExit(worker, timeout: .seconds(30))
        XCTAssertTrue(try waitFor(10) { collected.data != nil })
        let logs = String(decoding: collected.data ?? Data(), as: UTF8.self)
        XCTAssertFalse(logs.isEmpty, "the worker logged nothing at debug; the check proves nothing")

        let basic = Data("\(clientID):\(wrong)".utf8).base64EncodedString()
        var outputs = ["worker log": logs]
        let name: String = queue
        for arguments: [String] in [
            ["jobs", "show", String(ids[0])], ["jobs", "show", String(ids[0]), "--json"], ["dead", "list"],
            ["dead", "list", "--json"], ["queues", "show", name], ["queues", "show", name, "--json"],
            ["queues", "list"], ["queues", "list", "--json"], ["jobs", "list", "--queue", name, "--json"],
        ] {
            let result = try CourierRunner.run(arguments, databaseURL: url)
            XCTAssertEqual(result.status, 0, "\(arguments): \(result.stderr)")
            outputs[arguments.joined(separator: " ")] = result.stdout + result.stderr
        }
        XCTAssertTrue(outputs["jobs show \(ids[0])"]?.contains("401 invalid_client") ?? false, outputs.description)
        XCTAssertTrue(outputs["queues show \(name)"]?.contains(tokenURL) ?? false, "queues show names the token URL")
        XCTAssertTrue(outputs["queues show \(name)"]?.contains(clientID) ?? false, "queues show names the client id")
        let rows = try probe.connection.query(
            """
            SELECT coalesce(string_agg(a::text, ' '), '') FROM courier.attempts a
            JOIN courier.jobs j ON j.id = a.job_id WHERE j.queue = $1
            """, [queue])[0].decode(0, as: String.self)
        outputs["attempt rows"] = rows
        outputs["job rows"] = try probe.connection.query(
            "SELECT string_agg(j::text, ' ') FROM courier.jobs j WHERE j.queue = $1", [queue])[0].decode(0, as: String.self)
        XCTAssertTrue(rows.contains("invalid_client"), "the attempt rows record the failure")
        for (name, text) in outputs {
            XCTAssertFalse(text.contains(wrong), "\(name) shows the secret")
            XCTAssertFalse(text.contains(basic), "\(name) shows the Basic credentials")
        }
    }

    func testUnreachableTokenEndpointIsRetriedLikeATransportFailure() async throws {
        let receiver = try await startReceiver(valid: TokenSet(["tok-1"]))
        // A port nothing listens on: bind, note the port, close.
        let closed = try await HTTPSink.start { _ in .respond(status: 200) }
        let port = closed.port
        await closed.shutdown()
        try setOAuth(tokenURL: "http://127.0.0.1:\(port)/token")
        let id = try probe.enqueue(url: receiver.baseURL + "/hook", queue: queue, maxAttempts: 2, retrySeconds: [0.1])
        _ = try startWorkerProcess()
        XCTAssertTrue(try probe.waitUntilSettled(queue: queue, timeout: .seconds(30)))
        let job = try probe.job(id)
        XCTAssertEqual(job.state, "dead")
        XCTAssertEqual(job.attempt, 2, "the first failure was retried on the queue's schedule")
        XCTAssertTrue(
            job.lastError?.hasPrefix("attempts exhausted (2 of 2): oauth token request to http://127.0.0.1:\(port)/token failed: connectRefused") ?? false,
            job.lastError ?? "nil")
        XCTAssertTrue(log.all.isEmpty)
        let streak = try probe.connection.query(
            "SELECT coalesce(max(failure_streak), 0) FROM courier.destinations WHERE host = '127.0.0.1'"
        )[0].decode(0, as: Int.self)
        XCTAssertEqual(streak, 0, "the receiver's breaker counts only the receiver's failures")
    }
}

/// The token server's requests, thread-safely.
private final class TokenLog: @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [SinkRequest] = []

    /// Records a request; returns its number (1-based).
    func record(_ request: SinkRequest) -> Int {
        lock.withLock {
            requests.append(request)
            return requests.count
        }
    }

    var count: Int { lock.withLock { requests.count } }
    var all: [SinkRequest] { lock.withLock { requests } }
}

/// Bytes a reader thread hands over.
private final class Collected: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Data?
    func set(_ data: Data) { lock.withLock { stored = data } }
    var data: Data? { lock.withLock { stored } }
}

/// The tokens a receiver accepts; a test replaces them.
private final class TokenSet: @unchecked Sendable {
    private let lock = NSLock()
    private var tokens: Set<String>
    init(_ tokens: Set<String>) { self.tokens = tokens }
    func contains(_ token: String) -> Bool { lock.withLock { tokens.contains(token) } }
    func replace(with tokens: Set<String>) { lock.withLock { self.tokens = tokens } }
}
