import AsyncHTTPClient
import CourierCore
import CourierSecrets
import CourierTesting
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Postgres
import XCTest

@testable import CourierWeb

/// A fresh migrated database and a console on 127.0.0.1 (port 0) per test, and a client that
/// keeps the session cookie and the CSRF token like a browser.
class WebTestCase: XCTestCase {
    static let password = "correct horse battery staple"

    var url = ""
    var connection: PostgresConnection!
    var server: RunningWebServer?
    var http: HTTPClient!

    override func setUp() async throws {
        url = try TestDatabase.create(label: "web")
        connection = try PostgresConnection(url)
        http = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))
    }

    override func tearDown() async throws {
        await server?.stop()
        try? await http?.shutdown()
        connection?.close()
        if !url.isEmpty { TestDatabase.drop(url) }
    }

    /// Starts the console on this test's database.
    @discardableResult
    func startServer(
        readOnly: Bool = false, pageSize: Int = 50, scanWindow: Int = 20_000, liveInterval: Duration = .seconds(2),
        statementTimeout: Duration = .seconds(15), trafficMaxAge: Duration = .seconds(10),
        loginFailures: LoginFailures = LoginFailures(),
        sessionIdleTimeout: Duration = .hours(12), clock: TestClock? = nil, secretsKey: SecretsKey? = nil,
        logs: LogCapture? = nil
    ) async throws -> RunningWebServer {
        var configuration = WebConfiguration(databaseURL: url, password: try WebPassword(fileContents: Self.password + "\n"))
        configuration.port = 0
        configuration.readOnly = readOnly
        configuration.pageSize = pageSize
        configuration.scanWindow = scanWindow
        configuration.liveInterval = liveInterval
        configuration.statementTimeout = statementTimeout
        configuration.trafficMaxAge = trafficMaxAge
        configuration.loginFailures = loginFailures
        configuration.sessionIdleTimeout = sessionIdleTimeout
        configuration.secretsKey = secretsKey
        if let clock { configuration.clock = { clock.now } }
        var logger = logs.map { capture in Logger(label: "courier.web.test") { _ in capture.handler() } }
            ?? Logger(label: "courier.web.test")
        logger.logLevel = logs == nil ? .critical : .trace
        let started = try await WebServer.start(configuration, logger: logger)
        server = started
        return started
    }

    var base: String { "http://127.0.0.1:\(server!.port)" }

    /// Every line the console logs, with its metadata, for tests that check what is logged.
    final class LogCapture: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []

        /// The lines so far, each the message and its metadata.
        var text: String { lock.withLock { lines.joined(separator: "\n") } }

        func append(_ line: String) { lock.withLock { lines.append(line) } }

        func handler() -> any LogHandler { Handler(capture: self) }

        struct Handler: LogHandler {
            let capture: LogCapture
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .trace

            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }

            func log(event: LogEvent) {
                let all = metadata.merging(event.metadata ?? [:]) { $1 }
                capture.append("\(event.level) \(event.message) \(all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))")
            }
        }
    }

    /// A clock the test moves by hand, for the sessions' idle timeout.
    final class TestClock: @unchecked Sendable {
        private let lock = NSLock()
        private var current = Date()

        /// What time the console thinks it is.
        var now: Date { lock.withLock { current } }

        /// Moves the time on by `duration`.
        func advance(by duration: Duration) {
            let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
            lock.withLock { current = current.addingTimeInterval(seconds) }
        }
    }

    /// One answer.
    struct Page {
        var status: Int
        var headers: HTTPHeaders
        var body: String
        var location: String? { headers.first(name: "location") }
    }

    /// A browser: the session cookie and the last CSRF token seen.
    final class Browser: @unchecked Sendable {
        let test: WebTestCase
        var cookie: String?
        var csrf: String?

        init(_ test: WebTestCase) { self.test = test }

        func get(_ path: String, headers: [(String, String)] = []) async throws -> Page {
            try await send("GET", path, body: nil, headers: headers)
        }

        func post(_ path: String, _ form: [(String, String)], headers: [(String, String)] = []) async throws -> Page {
            let body = form.map { "\(Self.escape($0.0))=\(Self.escape($0.1))" }.joined(separator: "&")
            return try await send("POST", path, body: body, headers: headers)
        }

        static func escape(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
        }

        func send(_ method: String, _ path: String, body: String?, headers: [(String, String)]) async throws -> Page {
            var request = HTTPClientRequest(url: test.base + path)
            request.method = HTTPMethod(rawValue: method)
            if let cookie { request.headers.add(name: "Cookie", value: "courier_session=\(cookie)") }
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let body {
                request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
                request.body = .bytes(ByteBuffer(string: body))
            }
            let response = try await test.http.execute(request, timeout: .seconds(30))
            let buffer = try await response.body.collect(upTo: 16 << 20)
            let page = Page(status: Int(response.status.code), headers: response.headers, body: String(buffer: buffer))
            if let token = WebTestCase.csrfToken(in: page.body) { csrf = token }
            return page
        }

        /// Logs in as `name`; returns the answer to the login form.
        @discardableResult
        func login(name: String = "alice", password: String = WebTestCase.password, headers: [(String, String)] = []) async throws -> Page {
            let page = try await post("/login", [("name", name), ("password", password), ("next", "/queues")], headers: headers)
            if let setCookie = page.headers.first(name: "set-cookie"),
                let value = setCookie.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last
            {
                cookie = String(value)
                _ = try await get("/queues")
            }
            return page
        }
    }

    /// A request for the live updates with session `cookie`.
    func eventsRequest(cookie: String) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: base + "/events")
        request.headers.add(name: "Cookie", value: "courier_session=\(cookie)")
        request.headers.add(name: "Accept", value: "text/event-stream")
        return request
    }

    static func csrfToken(in html: String) -> String? {
        guard let range = html.range(of: #"name="csrf" value=""#) else { return nil }
        let rest = html[range.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        let token = String(rest[..<end])
        return token.isEmpty ? nil : token
    }

    /// Ids of the job rows on a list page, in order.
    static func jobIDs(in html: String) -> [Int64] {
        html.components(separatedBy: #"<tr data-job=""#).dropFirst().compactMap { part in
            part.split(separator: "\"", maxSplits: 1).first.flatMap { Int64($0) }
        }
    }

    /// The link of the "Older" page, HTML entities undone.
    static func nextLink(in html: String) -> String? {
        guard let range = html.range(of: #"<a rel="next" href=""#) else { return nil }
        let rest = html[range.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<end]).replacingOccurrences(of: "&amp;", with: "&")
    }

    // MARK: Rows

    /// Inserts a job written around the API (for states and times a test needs) and returns its id.
    @discardableResult
    func insertJob(
        queue: String = "default", state: JobState = .pending, url jobURL: String = "https://hooks.example/a",
        headers: String = "{}", body: String? = nil, createdSecondsAgo: Double = 0, lastError: String? = nil
    ) throws -> Int64 {
        let finished = [JobState.succeeded, .dead, .cancelled].contains(state)
        let row = try connection.query(
            """
            INSERT INTO courier.jobs (queue, state, url, headers, body, attempt, max_attempts, run_at, created_at,
                                      finished_at, locked_by, locked_until, last_error, last_status)
            VALUES ($1, $2::courier.job_state, $3, $4::jsonb, convert_to($5, 'UTF8'), $6, 5,
                    now() - $7 * interval '1 second', now() - $7 * interval '1 second',
                    CASE WHEN $8 THEN now() - $7 * interval '1 second' / 2 END,
                    CASE WHEN $2 = 'running' THEN 'w1' END, CASE WHEN $2 = 'running' THEN now() + interval '1 minute' END,
                    $9, CASE WHEN $8 THEN 503 END)
            RETURNING id
            """,
            [queue, state.rawValue, jobURL, headers, body, state == .pending ? 0 : 1, createdSecondsAgo, finished, lastError])
        return try row[0].decode(0)
    }

    /// Adds an attempt row to job `id`.
    func insertAttempt(job id: Int64, attempt: Int, status: Int?, error: String?, response: String?) throws {
        try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, error, worker,
                                          response_excerpt)
            VALUES ($1, $2, now() - interval '1 minute', now() - interval '1 minute' + interval '120 milliseconds', 120,
                    $3, $4, 'worker-1', $5)
            """,
            [id, attempt, status, error, response])
    }

    /// Makes the maintained counts current (the worker's maintenance does this every 5 s).
    func foldCounts() throws {
        try connection.query("SELECT courier.fold_job_counts()")
    }
}
