import AsyncHTTPClient
import CourierCore
import Foundation
import NIOCore
import CourierWeb
import Postgres
import XCTest

/// Login, sessions, CSRF, read-only and the security headers, against a real console and a
/// real database.
final class WebSecurityTests: WebTestCase {
    static let getRoutes = ["/", "/queues", "/queues/default", "/jobs", "/jobs?queue=billing", "/jobs/1", "/dead", "/dead/requeue",
                            "/destinations", "/destinations/hooks.example", "/endpoints", "/endpoints?tenant=acme", "/endpoints/1", "/messages",
                            "/messages?tenant=acme&event_type=a.b", "/messages/1", "/events", "/no-such-page"]
    static let postRoutes = ["/queues/pause", "/queues/resume", "/jobs/1/requeue", "/dead/requeue",
                             "/destinations/enable", "/destinations/disable", "/endpoints/1/disable", "/endpoints/1/enable",
                             "/endpoints/1/rotate", "/messages/1/resend", "/logout", "/no-such-page"]

    func testEveryRouteNeedsALogin() async throws {
        let id = try insertJob(queue: "billing", state: .dead, url: "https://private-host.example/x")
        try await startServer()
        let anonymous = Browser(self)
        for route in Self.getRoutes + ["/jobs/\(id)"] {
            let page = try await anonymous.get(route)
            XCTAssertEqual(page.status, 401, route)
            XCTAssertFalse(page.body.contains("private-host"), route)
            XCTAssertFalse(page.body.contains("billing") && route != "/jobs?queue=billing", route)
            if route != "/events" {
                XCTAssertTrue(page.body.contains(#"<form class="login" method="post" action="/login">"#), route)
            }
        }
        // A cookie the server never issued is no session.
        anonymous.cookie = "forged-session-value"
        for route in Self.postRoutes + ["/jobs/\(id)/requeue"] {
            let page = try await anonymous.post(route, [("queue", "billing"), ("host", "private-host.example"), ("csrf", "x")])
            XCTAssertEqual(page.status, 401, route)
        }
        let paused = try connection.query("SELECT count(*)::int FROM courier.queues WHERE paused")[0].decode(0, as: Int.self)
        XCTAssertEqual(paused, 0)
        XCTAssertEqual(try connection.query("SELECT state::text FROM courier.jobs WHERE id = $1", [id])[0].decode(0, as: String.self), "dead")
    }

    /// A statement that waits on a lock held elsewhere is cancelled by the server after the
    /// console's statement timeout: the page says what happened instead of hanging, and the
    /// pool's connection serves the next page once the lock is gone.
    func testAPageWaitingOnALockAnswersAfterTheStatementTimeout() async throws {
        try insertJob(queue: "billing")
        try await startServer(statementTimeout: .seconds(1))
        let browser = Browser(self)
        _ = try await browser.login()
        let holder = try PostgresConnection(url)
        defer { holder.close() }
        try holder.simpleQuery("BEGIN; LOCK TABLE courier.job_counts IN ACCESS EXCLUSIVE MODE")
        let started = Date()
        let blocked = try await browser.get("/queues")
        let waited = Date().timeIntervalSince(started)
        XCTAssertEqual(blocked.status, 500)
        XCTAssertTrue(blocked.body.contains("statement timeout"), blocked.body)
        XCTAssertGreaterThan(waited, 0.9)
        XCTAssertLessThan(waited, 10)
        try holder.simpleQuery("ROLLBACK")
        let page = try await browser.get("/queues")
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(page.body.contains(#"data-queue="billing""#))
    }

    /// Guesses sent at once over many connections are bounded like guesses one after another:
    /// the address's tries are used up, and then even the right password gets 429.
    func testGuessesOverManyConnectionsAreCutOffPerAddress() async throws {
        try await startServer(loginFailures: LoginFailures(limit: 3, window: .seconds(600)))
        let http: HTTPClient = self.http
        let url = base + "/login"
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for guess in 0..<6 {
                group.addTask {
                    var request = HTTPClientRequest(url: url)
                    request.method = .POST
                    request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
                    request.body = .bytes(ByteBuffer(string: "name=mallory&password=wrong+guess+\(guess)&next=%2Fqueues"))
                    return Int(try await http.execute(request, timeout: .seconds(30)).status.code)
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(statuses.sorted(), [401, 401, 401, 429, 429, 429])
        let browser = Browser(self)
        let refused = try await browser.login()
        XCTAssertEqual(refused.status, 429)
        XCTAssertNil(refused.headers.first(name: "set-cookie"))
        XCTAssertTrue(refused.body.contains("Too many wrong passwords from your address: try again in"), refused.body)
        let retryAfter = Int(refused.headers.first(name: "retry-after") ?? "")
        XCTAssertNotNil(retryAfter)
        XCTAssertGreaterThan(retryAfter ?? 0, 590)
        XCTAssertLessThanOrEqual(retryAfter ?? 0, 600)
        let queuesStatus = try await browser.get("/queues").status
        XCTAssertEqual(queuesStatus, 401)
    }

    func testWrongPasswordGetsNoSessionAndTheLoginPageAgain() async throws {
        try await startServer()
        let browser = Browser(self)
        let page = try await browser.login(password: "correct horse battery stapl")
        XCTAssertEqual(page.status, 401)
        XCTAssertNil(page.headers.first(name: "set-cookie"))
        XCTAssertTrue(page.body.contains("Wrong password."))
        XCTAssertFalse(page.body.contains("correct horse"))
        let queuesStatus = try await browser.get("/queues").status
        XCTAssertEqual(queuesStatus, 401)
    }

    func testSessionCookieFlagsAndSecurityHeaders() async throws {
        let job = try insertJob(queue: "default", state: .succeeded)
        try insertAttempt(job: job, attempt: 1, status: 200, error: nil, response: "ok")
        try foldCounts()
        try await startServer()
        let browser = Browser(self)
        let login = try await browser.login()
        XCTAssertEqual(login.status, 303)
        XCTAssertEqual(login.location, "/queues")
        let cookie = try XCTUnwrap(login.headers.first(name: "set-cookie"))
        XCTAssertTrue(cookie.contains("HttpOnly"), cookie)
        XCTAssertTrue(cookie.contains("SameSite=Strict"), cookie)
        XCTAssertFalse(cookie.contains("Secure"), "plain HTTP on loopback: \(cookie)")
        let tls = try await Browser(self).login(headers: [("X-Forwarded-Proto", "https")])
        XCTAssertTrue(try XCTUnwrap(tls.headers.first(name: "set-cookie")).contains("; Secure"))

        for route in ["/queues", "/queues/default", "/jobs", "/dead", "/destinations", "/destinations/hooks.example",
                      "/endpoints", "/messages", "/login"] {
            let page = try await browser.get(route)
            XCTAssertEqual(page.status, 200, route)
            XCTAssertEqual(page.headers.first(name: "content-security-policy"),
                           "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'")
            XCTAssertEqual(page.headers.first(name: "x-content-type-options"), "nosniff")
            XCTAssertEqual(page.headers.first(name: "referrer-policy"), "no-referrer")
            XCTAssertEqual(page.headers.first(name: "x-frame-options"), "DENY")
            // No inline script or style: the policy would block it, so the page must not need it.
            for piece in page.body.components(separatedBy: "<script").dropFirst() {
                XCTAssertTrue(piece.hasPrefix(#" src="/static/"#), "inline script on \(route)")
            }
            XCTAssertFalse(page.body.contains("<style"), route)
            XCTAssertFalse(page.body.contains(" style="), route)
            XCTAssertFalse(page.body.range(of: #" on[a-z]+="#, options: .regularExpression) != nil, route)
        }
        // Logging out ends the session on the server, not only in the browser.
        let out = try await browser.post("/logout", [("csrf", try XCTUnwrap(browser.csrf))])
        XCTAssertEqual(out.status, 303)
        let afterLogout = try await browser.get("/queues").status
        XCTAssertEqual(afterLogout, 401)
    }

    func testAPostWithoutTheCSRFTokenIsRefused() async throws {
        try insertJob(queue: "billing")
        try await startServer()
        let browser = Browser(self)
        try await browser.login()
        let token = try XCTUnwrap(browser.csrf)

        let missing = try await browser.post("/queues/pause", [("queue", "billing")])
        XCTAssertEqual(missing.status, 403)
        let wrong = try await browser.post("/queues/pause", [("queue", "billing"), ("csrf", String(token.reversed()))])
        XCTAssertEqual(wrong.status, 403)
        // Another session's token is no good either.
        let other = Browser(self)
        try await other.login(name: "mallory")
        let foreign = try await browser.post("/queues/pause", [("queue", "billing"), ("csrf", try XCTUnwrap(other.csrf))])
        XCTAssertEqual(foreign.status, 403)
        XCTAssertEqual(try pausedQueues(), [])
        XCTAssertEqual(try auditCount(), 0)

        let good = try await browser.post("/queues/pause", [("queue", "billing"), ("csrf", token)])
        XCTAssertEqual(good.status, 303)
        XCTAssertEqual(try pausedQueues(), ["billing"])
        let audit = try connection.query("SELECT who, action, target, jobs::int FROM courier.web_audit")
        XCTAssertEqual(audit.rowCount, 1)
        XCTAssertEqual(try audit[0].decode(0, as: String.self), "alice")
        XCTAssertEqual(try audit[0].decode(1, as: String.self), "queue.pause")
        XCTAssertEqual(try audit[0].decode(2, as: String.self), "billing")
        let page = try await browser.get("/queues")
        XCTAssertTrue(page.body.contains("Queue billing paused."))
        XCTAssertTrue(page.body.contains(#"action="/queues/resume""#))

        // A queue that does not exist is not created by a form.
        let unknown = try await browser.post("/queues/pause", [("queue", "nosuchqueue"), ("csrf", token)])
        XCTAssertEqual(unknown.status, 404)
        XCTAssertEqual(try pausedQueues(), ["billing"])
    }

    func testReadOnlyShowsNoActionAndRefusesForgedPosts() async throws {
        let dead = try insertJob(queue: "billing", state: .dead, url: "https://hooks.example/dead")
        try insertAttempt(job: dead, attempt: 1, status: 500, error: "HTTP 500", response: "oops")
        try connection.query("INSERT INTO courier.destinations (host) VALUES ('hooks.example')")
        try foldCounts()
        try await startServer(readOnly: true)
        let browser = Browser(self)
        try await browser.login()
        let token = try XCTUnwrap(browser.csrf)
        for route in ["/queues", "/queues/billing", "/jobs", "/dead", "/jobs/\(dead)", "/destinations",
                      "/destinations/hooks.example", "/endpoints", "/messages"] {
            let page = try await browser.get(route)
            XCTAssertEqual(page.status, 200, route)
            XCTAssertTrue(page.body.contains("Read-only console"), route)
            // The only form that posts is the logout.
            let posts = page.body.components(separatedBy: #"method="post""#).count - 1
            XCTAssertEqual(posts, 1, route)
            XCTAssertTrue(page.body.contains(#"<form class="logout" method="post" action="/logout">"#), route)
            XCTAssertFalse(page.body.contains("Requeue"), route)
            XCTAssertFalse(page.body.contains("Pause"), route)
            XCTAssertFalse(page.body.contains(">Disable<"), route)
        }
        let deadListed = try await browser.get("/dead").body.contains("/jobs/\(dead)")
        XCTAssertTrue(deadListed, "the dead job is listed")
        let requeueAllStatus = try await browser.get("/dead/requeue").status
        XCTAssertEqual(requeueAllStatus, 403)

        let forged: [(String, [(String, String)])] = [
            ("/queues/pause", [("queue", "billing")]),
            ("/jobs/\(dead)/requeue", []),
            ("/dead/requeue", [("max_id", "\(Int64.max)")]),
            ("/destinations/disable", [("host", "hooks.example")]),
        ]
        for (route, form) in forged {
            let page = try await browser.post(route, form + [("csrf", token)])
            XCTAssertEqual(page.status, 403, route)
        }
        XCTAssertEqual(try pausedQueues(), [])
        XCTAssertEqual(try connection.query("SELECT state::text FROM courier.jobs WHERE id = $1", [dead])[0].decode(0, as: String.self), "dead")
        XCTAssertEqual(try connection.query("SELECT count(*)::int FROM courier.destinations WHERE disabled_at IS NOT NULL")[0].decode(0, as: Int.self), 0)
        XCTAssertEqual(try auditCount(), 0)
        // Logging out still works.
        let logoutStatus = try await browser.post("/logout", [("csrf", token)]).status
        XCTAssertEqual(logoutStatus, 303)
    }

    func testRequeueOneAndAllWriteAuditRows() async throws {
        let one = try insertJob(queue: "billing", state: .dead, url: "https://hooks.example/1", lastError: "HTTP 503")
        try insertAttempt(job: one, attempt: 1, status: 503, error: "HTTP 503", response: "busy")
        let others = try (0..<3).map { _ in
            try insertJob(queue: "billing", state: .dead, url: "https://hooks.example/2", lastError: "HTTP 500")
        }
        let elsewhere = try insertJob(queue: "emails", state: .dead, url: "https://hooks.example/3", lastError: "HTTP 500")
        try await startServer()
        let browser = Browser(self)
        try await browser.login(name: "bob")

        let jobPage = try await browser.get("/jobs/\(one)")
        XCTAssertTrue(jobPage.body.contains(#"<ol class="timeline" id="attempts">"#))
        XCTAssertTrue(jobPage.body.contains("HTTP 503"))
        let requeued = try await browser.post("/jobs/\(one)/requeue", [("csrf", try XCTUnwrap(browser.csrf)), ("back", "/jobs/\(one)")])
        XCTAssertEqual(requeued.status, 303)
        XCTAssertEqual(requeued.location, "/jobs/\(one)")
        let row = try connection.query("SELECT state::text, attempt, run_at <= now() FROM courier.jobs WHERE id = $1", [one])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "pending")
        XCTAssertEqual(try row.decode(1, as: Int.self), 0)
        XCTAssertEqual(try row.decode(2, as: Bool.self), true)
        let requeuedNotice = try await browser.get("/jobs/\(one)").body.contains("requeued")
        XCTAssertTrue(requeuedNotice)
        // Twice is a no-op with no second audit row.
        _ = try await browser.post("/jobs/\(one)/requeue", [("csrf", try XCTUnwrap(browser.csrf))])

        // Requeue all that match: the count first, then exactly those.
        let confirm = try await browser.get("/dead/requeue?queue=billing&error=500")
        XCTAssertEqual(confirm.status, 200)
        XCTAssertTrue(confirm.body.contains(#"<p id="requeue-count"><strong>3</strong> dead jobs match"#), confirm.body)
        let later = try insertJob(queue: "billing", state: .dead, url: "https://hooks.example/4", lastError: "HTTP 500")
        let fields = WebTestCase.hiddenFields(in: confirm.body)
        let done = try await browser.post("/dead/requeue", fields)
        XCTAssertEqual(done.status, 303)
        let states = try connection.query("SELECT id, state::text FROM courier.jobs ORDER BY id").rows.map {
            (try $0.decode(0, as: Int64.self), try $0.decode(1, as: String.self))
        }
        let byID = Dictionary(uniqueKeysWithValues: states)
        for id in others { XCTAssertEqual(byID[id], "pending") }
        XCTAssertEqual(byID[elsewhere], "dead")
        XCTAssertEqual(byID[later], "dead", "a job that died after the count is not moved")

        let audit = try connection.query("SELECT who, action, target, jobs::int FROM courier.web_audit ORDER BY id")
        XCTAssertEqual(audit.rowCount, 2)
        XCTAssertEqual(try audit[0].decode(1, as: String.self), "job.requeue")
        XCTAssertEqual(try audit[0].decode(2, as: String.self), "job \(one)")
        XCTAssertEqual(try audit[0].decode(3, as: Int.self), 1)
        XCTAssertEqual(try audit[1].decode(0, as: String.self), "bob")
        XCTAssertEqual(try audit[1].decode(1, as: String.self), "dead.requeue_all")
        XCTAssertEqual(try audit[1].decode(3, as: Int.self), 3)
        XCTAssertTrue(try audit[1].decode(2, as: String.self).contains("in queue billing"))
    }

    func testDestinationsDisableAndEnable() async throws {
        try insertJob(queue: "billing", url: "https://slow.example/x")
        try await startServer()
        let browser = Browser(self)
        try await browser.login()
        let page = try await browser.get("/destinations")
        XCTAssertTrue(page.body.contains(#"<tr data-host="slow.example">"#))
        let token = try XCTUnwrap(browser.csrf)
        let disableStatus = try await browser.post("/destinations/disable", [("host", "slow.example"), ("csrf", token)]).status
        XCTAssertEqual(disableStatus, 303)
        XCTAssertEqual(try connection.query("SELECT count(*)::int FROM courier.destinations WHERE disabled_at IS NOT NULL")[0].decode(0, as: Int.self), 1)
        let shownDisabled = try await browser.get("/destinations").body.contains("<strong>disabled</strong>")
        XCTAssertTrue(shownDisabled)
        let enableStatus = try await browser.post("/destinations/enable", [("host", "slow.example"), ("csrf", token)]).status
        XCTAssertEqual(enableStatus, 303)
        XCTAssertEqual(try connection.query("SELECT count(*)::int FROM courier.destinations WHERE disabled_at IS NOT NULL")[0].decode(0, as: Int.self), 0)
        XCTAssertEqual(try auditCount(), 2)
    }

    private func pausedQueues() throws -> [String] {
        try connection.query("SELECT name FROM courier.queues WHERE paused ORDER BY name").rows.map { try $0.decode(0) }
    }

    private func auditCount() throws -> Int {
        try connection.query("SELECT count(*)::int FROM courier.web_audit")[0].decode(0)
    }
}

extension WebTestCase {
    /// The hidden inputs of a page's forms after the logout form, as a browser would send them.
    static func hiddenFields(in html: String) -> [(String, String)] {
        let pattern = #"<input type="hidden" name="([^"]+)" value="([^"]*)">"#
        let regex = try! NSRegularExpression(pattern: pattern)
        let range = NSRange(html.startIndex..., in: html)
        var seen = Set<String>()
        return regex.matches(in: html, range: range).compactMap { match in
            let name = String(html[Range(match.range(at: 1), in: html)!])
            let value = String(html[Range(match.range(at: 2), in: html)!])
                .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
                .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&amp;", with: "&")
            guard seen.insert(name).inserted else { return nil }
            return (name, value)
        }
    }
}
