import AsyncHTTPClient
import CourierCore
import Foundation
import NIOCore
import Postgres
import XCTest

@testable import CourierWeb

/// The router and its middleware against a real console: the form's size cap, idle sessions,
/// `next` through a real login, paths that are no job, the headers on every kind of answer,
/// and the view models against the templates' keys.
final class WebRouterTests: WebTestCase {
    func testAFormOverTheCapGets413AndChangesNothing() async throws {
        try insertJob(queue: "billing")
        try await startServer()
        let browser = Browser(self)
        try await browser.login()
        let token = try XCTUnwrap(browser.csrf)

        let tooLarge = try await browser.post(
            "/queues/pause", [("queue", "billing"), ("csrf", token), ("pad", String(repeating: "x", count: 70_000))])
        XCTAssertEqual(tooLarge.status, 413)
        XCTAssertEqual(tooLarge.headers.first(name: "content-security-policy"), SecurityHeaders.contentSecurityPolicy)
        XCTAssertEqual(try pausedQueues(), [])
        XCTAssertEqual(try auditCount(), 0)

        // A form of exactly 64 KiB is read: the cap is the limit, not something below it.
        let prefix = "queue=billing&csrf=\(token)&pad="
        let fits = try await browser.send(
            "POST", "/queues/pause", body: prefix + String(repeating: "x", count: 64 * 1024 - prefix.utf8.count),
            headers: [])
        XCTAssertEqual(fits.status, 303)
        XCTAssertEqual(try pausedQueues(), ["billing"])

        // The login form has the same cap, and an anonymous form is refused before it is read.
        let login = try await Browser(self).post(
            "/login", [("name", "alice"), ("password", WebTestCase.password), ("pad", String(repeating: "x", count: 70_000))])
        XCTAssertEqual(login.status, 413)
        XCTAssertNil(login.headers.first(name: "set-cookie"))
        let anonymous = try await Browser(self).post(
            "/queues/resume", [("queue", "billing"), ("pad", String(repeating: "x", count: 70_000))])
        XCTAssertEqual(anonymous.status, 401)
        XCTAssertEqual(try pausedQueues(), ["billing"])
    }

    func testAnIdleSessionIsRefusedAfterItsTimeout() async throws {
        try insertJob(queue: "billing")
        let clock = TestClock()
        try await startServer(sessionIdleTimeout: .minutes(30), clock: clock)
        let browser = Browser(self)
        try await browser.login()
        let token = try XCTUnwrap(browser.csrf)

        // Every request starts the idle time again.
        for _ in 0..<3 {
            clock.advance(by: .minutes(29))
            let status = try await browser.get("/queues").status
            XCTAssertEqual(status, 200)
        }
        clock.advance(by: .minutes(31))
        let page = try await browser.get("/jobs?queue=billing")
        XCTAssertEqual(page.status, 401)
        XCTAssertTrue(page.body.contains(#"<form class="login" method="post" action="/login">"#))
        let form = try await browser.post("/queues/pause", [("queue", "billing"), ("csrf", token)])
        XCTAssertEqual(form.status, 401)
        XCTAssertEqual(try pausedQueues(), [])
        // It is gone, not only refused once: the clock going no further does not bring it back.
        let again = try await browser.get("/queues").status
        XCTAssertEqual(again, 401)
    }

    func testNextGoesThroughARealLoginAndNeverOffSite() async throws {
        try insertJob(queue: "billing")
        try await startServer()

        let anonymous = Browser(self)
        let asked = try await anonymous.get("/jobs?queue=billing&state=pending")
        XCTAssertEqual(asked.status, 401)
        let fields = Dictionary(WebTestCase.hiddenFields(in: asked.body), uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(fields["next"], "/jobs?queue=billing&state=pending")
        let login = try await anonymous.post(
            "/login", [("name", "alice"), ("password", WebTestCase.password), ("next", try XCTUnwrap(fields["next"]))])
        XCTAssertEqual(login.status, 303)
        XCTAssertEqual(login.location, "/jobs?queue=billing&state=pending")
        let setCookie = try XCTUnwrap(login.headers.first(name: "set-cookie"))
        anonymous.cookie = setCookie.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last.map(String.init)
        let arrived = try await anonymous.get(try XCTUnwrap(login.location))
        XCTAssertEqual(arrived.status, 200)
        XCTAssertEqual(WebTestCase.jobIDs(in: arrived.body).count, 1)

        for evil in ["//evil.example", "/\\evil.example", "https://evil.example/", "evil.example", "/a\r\nLocation: //evil"] {
            let form = try await Browser(self).get("/login?next=" + Browser.escape(evil))
            let next = Dictionary(WebTestCase.hiddenFields(in: form.body), uniquingKeysWith: { first, _ in first })["next"]
            XCTAssertEqual(next, "/queues", evil)
            let answer = try await Browser(self).post(
                "/login", [("name", "alice"), ("password", WebTestCase.password), ("next", evil)])
            XCTAssertEqual(answer.status, 303, evil)
            XCTAssertEqual(answer.location, "/queues", evil)
        }
        // A path that itself looks off-site is not carried into the form either.
        let offSite = try await Browser(self).get("//evil.example")
        XCTAssertEqual(offSite.status, 401)
        XCTAssertEqual(Dictionary(WebTestCase.hiddenFields(in: offSite.body), uniquingKeysWith: { first, _ in first })["next"], "/queues")
    }

    func testPathsThatAreNoJobAreNotFound() async throws {
        let id = try insertJob(queue: "billing", state: .dead)
        try await startServer()
        let browser = Browser(self)
        try await browser.login()
        let token = try XCTUnwrap(browser.csrf)

        let job = try await browser.get("/jobs/\(id)")
        XCTAssertEqual(job.status, 200)
        XCTAssertTrue(job.body.contains("<h1>Job \(id) "), job.body)
        for bad in ["/jobs/0", "/jobs/-1", "/jobs/abc", "/jobs/%D9%A4%D9%A2", "/jobs/99999999999999999999", "/job/1",
                    "/jobs/\(id)/requeue", "/jobs/\(id)/x", "/no-such-page"] {
            let page = try await browser.get(bad)
            XCTAssertEqual(page.status, 404, bad)
            XCTAssertFalse(page.body.contains("<h1>Job "), bad)
            XCTAssertEqual(page.headers.first(name: "content-security-policy"), SecurityHeaders.contentSecurityPolicy, bad)
        }
        // Hummingbird's router ignores empty path components: `/jobs/` is the list, not a job.
        let list = try await browser.get("/jobs/")
        XCTAssertEqual(list.status, 200)
        XCTAssertTrue(list.body.contains("<h1>Jobs</h1>"))
        XCTAssertFalse(list.body.contains("<h1>Job "))
        let missing = try await browser.get("/jobs/\(id + 1000)")
        XCTAssertEqual(missing.status, 404)
        XCTAssertTrue(missing.body.contains("There is no job \(id + 1000)."))
        for bad in ["/jobs/0/requeue", "/jobs/abc/requeue", "/jobs/requeue", "/jobs/\(id)"] {
            let page = try await browser.post(bad, [("csrf", token)])
            XCTAssertEqual(page.status, 404, bad)
        }
        XCTAssertEqual(try connection.query("SELECT state::text FROM courier.jobs WHERE id = $1", [id])[0].decode(0, as: String.self), "dead")
        let requeued = try await browser.post("/jobs/\(id)/requeue", [("csrf", token)])
        XCTAssertEqual(requeued.status, 303)
        XCTAssertEqual(try connection.query("SELECT state::text FROM courier.jobs WHERE id = $1", [id])[0].decode(0, as: String.self), "pending")
    }

    /// 401, 403, 404, 405 and 500 carry the same headers as a page.
    func testEveryKindOfAnswerCarriesTheSecurityHeaders() async throws {
        try insertJob(queue: "billing")
        try await startServer(statementTimeout: .seconds(1))
        let browser = Browser(self)
        var answers: [(String, Page)] = []
        answers.append(("anonymous GET", try await browser.get("/queues")))
        answers.append(("anonymous POST", try await browser.post("/queues/pause", [("queue", "billing")])))
        answers.append(("anonymous events", try await browser.get("/events")))
        try await browser.login()
        answers.append(("no token", try await browser.post("/queues/pause", [("queue", "billing")])))
        answers.append(("unknown path", try await browser.get("/no-such-page")))
        answers.append(("other method", try await browser.send("PUT", "/queues", body: nil, headers: [])))
        let holder = try PostgresConnection(url)
        defer { holder.close() }
        try holder.simpleQuery("BEGIN; LOCK TABLE courier.job_counts IN ACCESS EXCLUSIVE MODE")
        answers.append(("failure", try await browser.get("/queues")))
        try holder.simpleQuery("ROLLBACK")
        XCTAssertEqual(answers.map(\.1.status), [401, 401, 401, 403, 404, 405, 500])
        for (what, page) in answers {
            XCTAssertEqual(page.headers.first(name: "content-security-policy"), SecurityHeaders.contentSecurityPolicy, what)
            XCTAssertEqual(page.headers.first(name: "x-content-type-options"), "nosniff", what)
            XCTAssertEqual(page.headers.first(name: "x-frame-options"), "DENY", what)
            XCTAssertEqual(page.headers.first(name: "referrer-policy"), "no-referrer", what)
        }
        XCTAssertFalse(answers[2].1.body.contains("<form"), "the live stream gets a bare 401")
        XCTAssertTrue(answers[6].1.body.contains("statement timeout"))
    }

    /// Every key a template uses is a property of the view it renders (or of what every page
    /// shares), so a renamed property cannot silently empty a page.
    func testEveryTemplateKeyIsAPropertyOfItsView() throws {
        // Mirror names a nil optional too; only the elements of lists need rows to be seen.
        let id = try insertJob(
            queue: "billing", state: .dead, headers: #"{"X-Tenant": "acme"}"#, body: "{}", lastError: "HTTP 503")
        try insertAttempt(job: id, attempt: 1, status: 503, error: "HTTP 503", response: "busy")
        try connection.query("INSERT INTO courier.destinations (host, disabled_at, disabled_reason) VALUES ('hooks.example', now(), 'r')")
        let detail = try XCTUnwrap(try AdminStore(connection: connection).job(id))
        let page = try WebStore(connection: connection).jobs(WebJobFilter(), before: nil, limit: 1)
        let destinations = try DestinationStore(connection: connection).list(limit: 10, defaultMaxInFlight: 200)
        XCTAssertFalse(page.jobs.isEmpty)
        XCTAssertFalse(destinations.isEmpty)
        let query = JobListQuery(FormData("queue=billing&since=1h&before=\(id + 1)"), dead: true)
        // A webhook endpoint (disabled, with a header and a payload filter), a message and its
        // delivery, a re-send, and a retiring secret, so every optional of their views is set.
        let webhooks = WebhookStore(connection: connection)
        let endpointID = try webhooks.addEndpoint(
            NewEndpoint(url: "https://receiver.example/h", eventTypes: ["*"], tenant: "acme", description: "d",
                        payloadFilter: #"{"a": 1}"#, headers: [("X-Ref", "v")]),
            seal: { _ in Array(repeating: 1, count: 40) })
        let published = try webhooks.publish(eventType: "a.b", payload: #"{"a": 1}"#, tenant: "acme", idempotencyKey: "k")
        _ = try webhooks.resend(messageID: published.messageID)
        try connection.query("UPDATE courier.jobs SET state = 'dead', attempt = 1, last_status = 500, last_error = 'HTTP 500', finished_at = now() WHERE message_id = $1", [published.messageID])
        _ = try webhooks.rotateSecret(endpointID, grace: .hours(1), seal: { _ in Array(repeating: 2, count: 40) })
        try webhooks.disableEndpoint(endpointID, reason: "r")
        let endpoint = try XCTUnwrap(try webhooks.endpoint(endpointID))
        let endpointDeliveries = try webhooks.endpointDeliveries(endpointID)
        let message = try XCTUnwrap(try webhooks.message(published.messageID))
        XCTAssertEqual(endpointDeliveries.count, 2)
        let shared = PageContent(template: "", csrf: "", actions: true, view: 0)
        let traffic = try WebStore(connection: connection).traffic().all
        XCTAssertEqual(traffic.attempts, 1)
        let queueDetail = try XCTUnwrap(try WebStore(connection: connection).queueDetail("billing"))

        let views: [String: [Any]] = [
            "layout": [LayoutView(
                title: "", content: "", user: "", csrf: "", nav: [NavigationItem(href: "", label: "", current: true)],
                readOnly: true, live: true, notice: "", problem: "")],
            "login": [LoginView(next: "/", name: "n")],
            "message": [MessageView(heading: "", text: "", back: ""), shared],
            "queues": [QueuesView([QueueOverview(name: "billing")], traffic: traffic), shared],
            "traffic": [TrafficView(traffic, scope: "all queues")],
            "queue": [QueueView(queueDetail, traffic: traffic), shared],
            "destination": [DestinationView(destinations[0], host: destinations[0].host, traffic: traffic), shared],
            "jobs": [JobsView(query, page: page, actions: true), shared],
            "filters": [JobsView(query, page: nil, actions: true)],
            "job": [JobView(detail, actions: true), shared],
            "requeueAll": [RequeueAllView(query, count: 1, maxID: 1), shared],
            "destinations": [DestinationsView(destinations), shared],
            "endpoints": [EndpointsView([endpoint], tenant: "acme", limit: 1), shared],
            "endpoint": [EndpointView(endpoint, deliveries: endpointDeliveries, deliveriesShown: 20, actions: true, canSeal: true,
                                      grace: .hours(24)), shared],
            "rotatedSecret": [RotatedSecretView(id: "1", url: "u", secret: "s", retiringUntil: "t", graceHours: 24), shared],
            "webhookMessages": [WebhookMessagesView(try webhooks.listMessages(.init()), tenant: "acme", eventType: "a.b",
                                                    before: 10, limit: 1), shared],
            "webhookMessage": [WebhookMessageView(message, actions: true), shared],
            "csrf": [shared],
            "content": [shared],
        ]
        XCTAssertEqual(Set(views.keys), Set(Templates.all.keys))
        let tag = try NSRegularExpression(pattern: #"\{\{\{?\s*[#^/]?\s*([A-Za-z][A-Za-z0-9_.]*)\s*\}?\}\}"#)
        for (name, text) in Templates.all {
            var labels = Set<String>()
            for view in views[name] ?? [] { Self.collectLabels(of: view, into: &labels) }
            let range = NSRange(text.startIndex..., in: text)
            for match in tag.matches(in: text, range: range) {
                let key = String(text[Range(match.range(at: 1), in: text)!])
                for part in key.split(separator: ".") {
                    XCTAssertTrue(labels.contains(String(part)), "\(name): {{\(key)}} is no property of its view")
                }
            }
        }
    }

    /// The property names of `value` and of every value inside it (array elements, optionals,
    /// nested structs).
    private static func collectLabels(of value: Any, into labels: inout Set<String>) {
        let mirror = Mirror(reflecting: value)
        switch mirror.displayStyle {
        case .optional, .collection:
            for child in mirror.children { collectLabels(of: child.value, into: &labels) }
        case .struct:
            // `Shown` renders as text, like a String.
            if value is Shown { return }
            for child in mirror.children {
                if let label = child.label { labels.insert(label) }
                collectLabels(of: child.value, into: &labels)
            }
        default:
            return
        }
    }

    private func pausedQueues() throws -> [String] {
        try connection.query("SELECT name FROM courier.queues WHERE paused ORDER BY name").rows.map { try $0.decode(0) }
    }

    private func auditCount() throws -> Int {
        try connection.query("SELECT count(*)::int FROM courier.web_audit")[0].decode(0)
    }
}
