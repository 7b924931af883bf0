import AsyncHTTPClient
import CourierCore
import Foundation
import Postgres
import XCTest

/// What the pages show: no secret anywhere, lists that match SQL, live updates from one reader.
final class WebPagesTests: WebTestCase {
    func testPlantedSecretsNeverAppearInAnyPage() async throws {
        let secrets = [
            "SECRETBEARER1", "SECRETAPIKEY2", "SECRETUSERPASS3", "SECRETQUERYTOKEN4", "SECRETBODYPASSWORD5",
            "SECRETNESTEDKEY6", "SECRETFORMVALUE7", "SECRETERRORPASS8", "SECRETRESPONSETOKEN9", "SECRETCALLBACK10",
            "whsec_SECRETSIGNING11", "SECRETCOOKIE12",
        ]
        let headers = """
            {"Authorization": "Bearer SECRETBEARER1", "X-Api-Key": "SECRETAPIKEY2", "Cookie": "sid=SECRETCOOKIE12",
             "X-Callback": "https://hook:SECRETCALLBACK10@cb.example/x", "X-Tenant": "acme-visible"}
            """
        let body = """
            {"event": "invoice.paid", "password": "SECRETBODYPASSWORD5",
             "nested": {"api_key": "SECRETNESTEDKEY6", "amount": 1},
             "note": "client_secret=SECRETFORMVALUE7 visible-note"}
            """
        let url = "https://user:SECRETUSERPASS3@secret-host.example/hook?token=SECRETQUERYTOKEN4&plain=visible-query"
        // Validation refuses credentials in a URL since migration 0004; an older version (or a
        // hand-written row) may have stored them, so the rows go in around the triggers.
        try connection.simpleQuery("SET session_replication_role = replica")
        let dead = try insertJob(queue: "billing", state: .dead, url: url, headers: headers, body: body,
                                 lastError: "GET https://u:SECRETERRORPASS8@secret-host.example failed")
        try insertAttempt(job: dead, attempt: 1, status: 401, error: "https://u:SECRETERRORPASS8@x.example refused",
                          response: "{\"error\": \"bad\", \"access_token\": \"SECRETRESPONSETOKEN9\"}")
        try insertJob(queue: "billing", state: .pending, url: url, headers: headers, body: "token=SECRETFORMVALUE7&a=1")
        try connection.simpleQuery("SET session_replication_role = DEFAULT")
        try connection.query("INSERT INTO courier.queues (name, signing_secret) VALUES ('billing', 'whsec_SECRETSIGNING11') ON CONFLICT (name) DO UPDATE SET signing_secret = excluded.signing_secret")
        try foldCounts()
        let server = try await startServer(liveInterval: .milliseconds(200))
        let browser = Browser(self)
        try await browser.login()

        var pages: [String: String] = [:]
        for route in ["/queues", "/jobs", "/jobs?queue=billing", "/jobs?host=secret-host.example", "/jobs/\(dead)",
                      "/jobs/\(dead + 1)", "/dead", "/dead?url=secret-host", "/dead/requeue?queue=billing", "/destinations",
                      "/endpoints", "/messages"] {
            let page = try await browser.get(route)
            XCTAssertEqual(page.status, 200, route)
            pages[route] = page.body
        }
        pages["/events"] = try await firstEvent(cookie: try XCTUnwrap(browser.cookie))
        _ = server
        for (route, html) in pages {
            for secret in secrets { XCTAssertFalse(html.contains(secret), "\(secret) on \(route)") }
        }
        // The pages do show the job, so the search above looked at the right text.
        let job = try XCTUnwrap(pages["/jobs/\(dead)"])
        XCTAssertTrue(job.contains("secret-host.example"))
        XCTAssertTrue(job.contains("acme-visible"))
        XCTAssertTrue(job.contains("visible-query"))
        XCTAssertTrue(job.contains("visible-note"))
        XCTAssertTrue(job.contains("invoice.paid"))
        XCTAssertTrue(job.contains("&lt;redacted, 20 bytes&gt;"), "the Authorization header is named, its value hidden")
        XCTAssertTrue(try XCTUnwrap(pages["/dead"]).contains("/jobs/\(dead)"))
        XCTAssertTrue(try XCTUnwrap(pages["/events"]).contains("billing"))
    }

    /// The first live event a browser gets.
    private func firstEvent(cookie: String) async throws -> String {
        let request = eventsRequest(cookie: cookie)
        let response = try await http.execute(request, timeout: .seconds(10))
        var text = ""
        for try await buffer in response.body {
            text += String(buffer: buffer)
            if text.contains("event: queues") && text.hasSuffix("\n\n") { break }
        }
        return text
    }

    func testFiltersAndKeysetPagingReturnTheRowsOfTheEquivalentSQL() async throws {
        // 150 jobs over 3 queues, every state, 3 hosts, spread over 150 minutes.
        let states: [JobState] = [.pending, .running, .retrying, .succeeded, .dead, .cancelled]
        for i in 0..<150 {
            try insertJob(
                queue: ["billing", "emails", "default"][i % 7 % 3], state: states[i % 6],
                url: "https://\(["a", "b", "c"][i % 5 % 3]).example/hook/\(i)?n=\(i % 7)",
                createdSecondsAgo: Double(i * 60), lastError: i % 4 == 0 ? "HTTP 503" : "timeout")
        }
        // A substring filter reads at most 13 rows per page: some pages come back short or empty
        // with a link to search further, and paging must still visit every match.
        try await startServer(pageSize: 7, scanWindow: 13)
        let browser = Browser(self)
        try await browser.login()

        let cases: [(String, String, [any PostgresEncodable])] = [
            ("/jobs", "true", []),
            ("/jobs?queue=billing", "queue = 'billing'", []),
            ("/jobs?state=dead", "state = 'dead'", []),
            ("/jobs?queue=emails&state=succeeded", "queue = 'emails' AND state = 'succeeded'", []),
            ("/jobs?host=B.example", "host = 'b.example'", []),
            ("/jobs?url=n%3D3", "strpos(url, 'n=3') > 0", []),
            // Rows are a minute apart; the bounds fall half-way between two of them.
            ("/jobs?since=89.5m&until=29.5m",
             "created_at >= now() - interval '5370 seconds' AND created_at < now() - interval '1770 seconds'", []),
            ("/dead", "state = 'dead'", []),
            ("/dead?queue=default&error=503", "state = 'dead' AND queue = 'default' AND strpos(last_error, '503') > 0", []),
        ]
        for (route, condition, parameters) in cases {
            var seen: [Int64] = []
            var next: String? = route
            var pages = 0
            var stoppedAtWindow = false
            while let path = next {
                let page = try await browser.get(path)
                XCTAssertEqual(page.status, 200, path)
                stoppedAtWindow = stoppedAtWindow || page.body.contains(#"<p class="hint" id="searched">"#)
                let ids = WebTestCase.jobIDs(in: page.body)
                XCTAssertLessThanOrEqual(ids.count, 7)
                seen += ids
                next = WebTestCase.nextLink(in: page.body)
                if let next { XCTAssertFalse(next.contains("offset"), next) }
                pages += 1
                XCTAssertLessThan(pages, 40, "paging must end")
            }
            let expected: [Int64] = try connection.query(
                "SELECT id FROM courier.jobs WHERE \(condition) ORDER BY id DESC", parameters).rows.map { try $0.decode(0) }
            XCTAssertFalse(expected.isEmpty, route)
            XCTAssertEqual(seen, expected, route)
            // The URL filter reads more than 13 candidates, so it must have stopped at its window
            // and gone on; a list without a substring filter never does.
            if route.contains("url=") { XCTAssertTrue(stoppedAtWindow, route) }
            if !route.contains("url=") && !route.contains("error=") { XCTAssertFalse(stoppedAtWindow, route) }
        }
        let bad = try await browser.get("/jobs?state=bogus")
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(WebTestCase.jobIDs(in: bad.body), [])
        let badTime = try await browser.get("/dead?since=yesterday")
        XCTAssertEqual(badTime.status, 400)
        XCTAssertTrue(badTime.body.contains("neither a duration"))
    }

    func testLiveUpdatesComeFromOneSharedReader() async throws {
        try insertJob(queue: "billing")
        try foldCounts()
        let server = try await startServer(liveInterval: .milliseconds(100))
        let browser = Browser(self)
        try await browser.login()
        let cookie = try XCTUnwrap(browser.cookie)

        let counter = EventCounter()
        var tasks: [Task<Void, any Error>] = []
        for tab in 0..<4 {
            let request = eventsRequest(cookie: cookie)
            let client = http!
            tasks.append(Task {
                let response = try await client.execute(request, timeout: .seconds(60))
                for try await buffer in response.body {
                    let text = String(buffer: buffer)
                    counter.add(tab, text.components(separatedBy: "event: queues").count - 1)
                    if counter.events(tab) >= 1_000 { break }
                }
            })
        }
        try await waitUntil { server.liveSubscribers == 4 && (0..<4).allSatisfy { counter.events($0) >= 1 } }
        let readsBefore = server.liveReads
        let eventsBefore = (0..<4).map { counter.events($0) }
        try await waitUntil { (0..<4).allSatisfy { counter.events($0) >= eventsBefore[$0] + 5 } }
        let reads = server.liveReads - readsBefore
        // Four tabs polling on their own would need at least 20 reads for 5 new events each.
        XCTAssertGreaterThanOrEqual(reads, 4)
        XCTAssertLessThan(reads, 12, "one reader feeds every tab")

        tasks.forEach { $0.cancel() }
        try await waitUntil { server.liveSubscribers == 0 }
        let idle = server.liveReads
        try await Task.sleep(nanoseconds: 500_000_000)
        XCTAssertLessThanOrEqual(server.liveReads - idle, 1, "no reads while nobody listens")
    }

    private func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(20)
        while !condition() {
            guard Date() < deadline else { return XCTFail("timed out waiting") }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }
}

/// Events received per tab.
final class EventCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [Int: Int] = [:]

    func add(_ tab: Int, _ count: Int) { lock.withLock { counts[tab, default: 0] += count } }
    func events(_ tab: Int) -> Int { lock.withLock { counts[tab] ?? 0 } }
}
