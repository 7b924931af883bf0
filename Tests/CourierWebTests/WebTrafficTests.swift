import CourierCore
import Foundation
import Postgres
import XCTest

@testable import CourierWeb

/// The overview's totals and hour, and the pages of one queue and one host: counts from the
/// maintained counts, the last hour from `courier.attempts` from the console's first second,
/// hostile names escaped, unknown names a 404.
final class WebTrafficTests: WebTestCase {
    /// Two queues to two hosts, with an hour of attempts written before the console starts:
    /// billing 3 a minute (every third a 503), emails 1 a minute, each 1 to 58 minutes ago, so
    /// the window holds them all however long the test takes.
    private func seedHour() throws -> (billing: Int64, emails: Int64) {
        try connection.query(
            """
            INSERT INTO courier.jobs (queue, state, url, attempt, max_attempts, finished_at, last_status)
            SELECT 'billing', 'succeeded', 'https://billing.example/hook', 1, 5, now() - n * interval '1 minute', 200
            FROM generate_series(1, 1000) n
            """)
        for _ in 0..<2 { try insertJob(queue: "billing", state: .dead, url: "https://billing.example/hook", lastError: "HTTP 503") }
        for _ in 0..<3 { try insertJob(queue: "billing", url: "https://billing.example/hook") }
        try insertJob(queue: "billing", state: .running, url: "https://billing.example/hook")
        for _ in 0..<4 { try insertJob(queue: "emails", state: .succeeded, url: "https://mail.example/send") }
        let billing = try insertJob(queue: "billing", state: .succeeded, url: "https://billing.example/hook")
        let emails = try insertJob(queue: "emails", state: .succeeded, url: "https://mail.example/send")
        try insertAttempts(job: billing, perMinute: 3, failEvery: 3)
        try insertAttempts(job: emails, perMinute: 1, failEvery: 0)
        try connection.query(
            """
            INSERT INTO courier.queues (name, max_attempts, max_in_flight, signing_secret, keep_succeeded, retry_schedule)
            VALUES ('billing', 7, 25, 'whsec_SECRETQUEUESIGNING1', interval '3 days', ARRAY[interval '10 seconds', interval '5 minutes'])
            """)
        try connection.query(
            """
            INSERT INTO courier.destinations (host, max_in_flight, rate_limit, disabled_at, disabled_reason)
            VALUES ('billing.example', 12, 5, now(), 'their certificate expired')
            """)
        try foldCounts()
        return (billing, emails)
    }

    /// `perMinute` attempts of job `id` in each of the minutes 1 to 58 ago (durations 10 to
    /// 99 ms); every `failEvery`th (counting from 1) is a 503, none when 0.
    private func insertAttempts(job id: Int64, perMinute: Int, failEvery: Int) throws {
        try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, error, worker)
            SELECT $1, k, now() - m * interval '1 minute' - interval '100 milliseconds', now() - m * interval '1 minute',
                   10 + (m * 7 + k * 13) % 90,
                   CASE WHEN $3 > 0 AND k % $3 = 0 THEN 503 ELSE 200 END,
                   CASE WHEN $3 > 0 AND k % $3 = 0 THEN 'HTTP 503' END, 'worker-1'
            FROM generate_series(1, 58) m, generate_series(1, $2) k
            """, [id, perMinute, failEvery])
    }

    /// The heights of the delivered and the failed bars, in order.
    private func bars(_ html: String) -> (delivered: [Double], failed: [Double]) {
        func heights(_ kind: String) -> [Double] {
            html.components(separatedBy: #"<rect class="\#(kind)""#).dropFirst().compactMap { part in
                part.components(separatedBy: #"height=""#).dropFirst().first?.split(separator: "\"").first.flatMap { Double($0) }
            }
        }
        return (heights("ok"), heights("failed"))
    }

    /// The text of the element with `data-<attribute>="<value>"`.
    private func figure(_ html: String, _ attribute: String, _ value: String) -> String? {
        guard let range = html.range(of: #"data-\#(attribute)="\#(value)">"#) else { return nil }
        return html[range.upperBound...].split(separator: "<", maxSplits: 1).first.map(String.init)
    }

    /// The percentiles of the durations of the last hour's attempts of `queue`'s jobs, as the
    /// pages write them.
    private func percentiles(queue: String?) throws -> [String] {
        let row = try connection.query(
            """
            SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms),
                   percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms),
                   percentile_cont(0.99) WITHIN GROUP (ORDER BY a.duration_ms)
            FROM courier.attempts a JOIN courier.jobs j ON j.id = a.job_id
            WHERE a.finished_at >= now() - interval '59 minutes' AND ($1::text IS NULL OR j.queue = $1)
            """, [queue])[0]
        return try (0..<3).map { PageFormat.milliseconds(try row.decode($0, as: Double.self)) }
    }

    func testOverviewShowsTotalsAndAnHourOfTrafficRightAfterStart() async throws {
        _ = try seedHour()
        try await startServer()
        let browser = Browser(self)
        try await browser.login()
        let page = try await browser.get("/queues")
        XCTAssertEqual(page.status, 200)
        let html = page.body
        // Totals over both queues from the maintained counts, succeeded included.
        XCTAssertEqual(figure(html, "total", "succeeded"), "1006")
        XCTAssertEqual(figure(html, "total", "pending"), "3")
        XCTAssertEqual(figure(html, "total", "running"), "1")
        XCTAssertEqual(figure(html, "total", "dead"), "2")
        XCTAssertTrue(html.contains(#"<td class="n" data-field="succeeded">1001</td>"#), "billing's succeeded")
        // The hour: 60 bars, every minute with attempts drawn, from the attempts table.
        let (delivered, failed) = bars(html)
        XCTAssertEqual(delivered.count, 60)
        XCTAssertEqual(failed.count, 60)
        XCTAssertGreaterThanOrEqual(delivered.filter { $0 > 0 }.count, 57)
        XCTAssertGreaterThanOrEqual(failed.filter { $0 > 0 }.count, 57)
        XCTAssertEqual(figure(html, "figure", "delivered"), "174")  // 58 × (2 + 1)
        XCTAssertEqual(figure(html, "figure", "failed"), "58")
        XCTAssertEqual(figure(html, "figure", "error-rate"), "25%")
        XCTAssertEqual(figure(html, "figure", "latency"), try percentiles(queue: nil).joined(separator: " / "))
        XCTAssertTrue(html.contains("174 delivered and 58 failed in the last hour"), html)
        XCTAssertFalse(html.contains("peak"))
        XCTAssertFalse(html.contains("since this console started"))
        // The queue and the host link to their pages.
        XCTAssertTrue(html.contains(#"<a href="/queues/billing">billing</a>"#))
        let destinations = try await browser.get("/destinations").body
        XCTAssertTrue(destinations.contains(#"<a href="/destinations/billing.example">billing.example</a>"#))
    }

    /// One read of the hour serves every page, queue and host until it is `trafficMaxAge` old,
    /// however many pages ask at once; then the next page reads it again and sees new attempts.
    func testOneReadOfTheHourServesEveryPageUntilItIsOld() async throws {
        let (billing, _) = try seedHour()
        let server = try await startServer(trafficMaxAge: .seconds(2))
        let browser = Browser(self)
        try await browser.login()
        let pages = ["/queues", "/queues/billing", "/queues/emails", "/destinations/billing.example", "/destinations/mail.example"]
        try await withThrowingTaskGroup(of: Int.self) { group in
            for path in pages + pages {
                group.addTask { try await browser.get(path).status }
            }
            for try await status in group { XCTAssertEqual(status, 200) }
        }
        XCTAssertEqual(server.trafficReads, 1, "the read at the start serves all ten pages")
        try insertAttempts(job: billing, perMinute: 1, failEvery: 0)
        let kept = try await browser.get("/queues/billing").body
        XCTAssertEqual(figure(kept, "figure", "delivered"), "116")
        try await Task.sleep(for: .milliseconds(2100))
        let fresh = try await browser.get("/queues/billing").body
        XCTAssertEqual(figure(fresh, "figure", "delivered"), "174")
        XCTAssertEqual(server.trafficReads, 2)
    }

    func testAnEmptyHourClaimsNoPeak() async throws {
        try insertJob(queue: "billing")
        try foldCounts()
        try await startServer()
        let browser = Browser(self)
        try await browser.login()
        let html = try await browser.get("/queues").body
        let (delivered, failed) = bars(html)
        XCTAssertEqual(delivered.count, 60)
        XCTAssertTrue((delivered + failed).allSatisfy { $0 == 0 })
        XCTAssertTrue(html.contains("No attempt finished in the last hour."))
        XCTAssertFalse(html.contains("busiest"))
        XCTAssertFalse(html.contains("a minute</span>"), "no top of the scale without attempts")
        XCTAssertEqual(figure(html, "figure", "error-rate"), "none")
        XCTAssertEqual(figure(html, "figure", "latency"), "- / - / -")
    }

    func testQueuePageShowsItsCountsItsHourAndItsSettings() async throws {
        _ = try seedHour()
        try await startServer()
        let browser = Browser(self)
        try await browser.login()
        let page = try await browser.get("/queues/billing")
        XCTAssertEqual(page.status, 200)
        let html = page.body
        for (state, count) in [("pending", 3), ("running", 1), ("retrying", 0), ("succeeded", 1001), ("dead", 2), ("cancelled", 0)] {
            XCTAssertEqual(figure(html, "state", state), String(count), state)
        }
        XCTAssertTrue(html.contains(#"href="/jobs?state=succeeded&amp;queue=billing""#))
        // Only billing's attempts: 2 of 3 a minute delivered.
        XCTAssertEqual(bars(html).delivered.count, 60)
        XCTAssertEqual(figure(html, "figure", "delivered"), "116")
        XCTAssertEqual(figure(html, "figure", "failed"), "58")
        XCTAssertEqual(figure(html, "figure", "error-rate"), "33%")
        XCTAssertEqual(figure(html, "figure", "latency"), try percentiles(queue: "billing").joined(separator: " / "))
        // Its settings, and of the signing secret only that it is set.
        for text in ["<dt>Max attempts</dt><dd>7</dd>", "<dt>Max in flight</dt><dd>25 per worker</dd>",
                     "<dt>Retry schedule</dt><dd>10s, 5m 0s</dd>", "<dt>Signing secret</dt><dd>set (never shown)</dd>",
                     "<dt>Keeps succeeded jobs</dt><dd>3d 0h</dd>", "<dt>State</dt><dd>active</dd>"] {
            XCTAssertTrue(html.contains(text), text)
        }
        XCTAssertFalse(html.contains("SECRETQUEUESIGNING1"))
        // The other queue: its own numbers and the defaults.
        let emails = try await browser.get("/queues/emails").body
        XCTAssertEqual(figure(emails, "state", "succeeded"), "5")
        XCTAssertEqual(figure(emails, "figure", "delivered"), "58")
        XCTAssertEqual(figure(emails, "figure", "failed"), "0")
        XCTAssertEqual(figure(emails, "figure", "error-rate"), "0%")
        XCTAssertTrue(emails.contains("<dt>Max attempts</dt><dd>10 (default)</dd>"))
        XCTAssertTrue(emails.contains("<dt>Signing secret</dt><dd>not set</dd>"))

        // Pausing from the queue page comes back to it.
        let token = try XCTUnwrap(browser.csrf)
        let paused = try await browser.post("/queues/pause", [("queue", "billing"), ("back", "/queues/billing"), ("csrf", token)])
        XCTAssertEqual(paused.status, 303)
        XCTAssertEqual(paused.location, "/queues/billing")
        let after = try await browser.get("/queues/billing").body
        XCTAssertTrue(after.contains("<dt>State</dt><dd>paused: workers skip it</dd>"))
        XCTAssertTrue(after.contains(#"action="/queues/resume""#))
    }

    func testHostPageShowsItsHourCapRateLimitAndWhyItIsDisabled() async throws {
        _ = try seedHour()
        try await startServer()
        let browser = Browser(self)
        try await browser.login()
        let page = try await browser.get("/destinations/billing.example")
        XCTAssertEqual(page.status, 200)
        let html = page.body
        XCTAssertEqual(figure(html, "field", "due"), "3")
        XCTAssertEqual(figure(html, "field", "running"), "1")
        XCTAssertEqual(figure(html, "field", "breaker"), "closed")
        XCTAssertEqual(bars(html).delivered.count, 60)
        XCTAssertEqual(figure(html, "figure", "delivered"), "116")
        XCTAssertEqual(figure(html, "figure", "failed"), "58")
        XCTAssertTrue(html.contains("<dt>Cap</dt><dd>12 in flight</dd>"))
        XCTAssertTrue(html.contains("<dt>Rate limit</dt><dd>5 requests a second</dd>"))
        XCTAssertTrue(html.contains("their certificate expired"))
        XCTAssertTrue(html.contains(#"action="/destinations/enable""#))
        // A host with attempts in the hour but neither settings nor waiting jobs has a page too.
        let mail = try await browser.get("/destinations/mail.example")
        XCTAssertEqual(mail.status, 200)
        XCTAssertEqual(figure(mail.body, "figure", "delivered"), "58")
        XCTAssertTrue(mail.body.contains("<dt>Settings</dt><dd>none: the workers&#39; defaults</dd>")
            || mail.body.contains("<dt>Settings</dt><dd>none: the workers&#x27; defaults</dd>")
            || mail.body.contains("<dt>Settings</dt><dd>none: the workers' defaults</dd>"), mail.body)
    }

    func testUnknownQueueOrHostIsA404Page() async throws {
        try insertJob(queue: "billing")
        try foldCounts()
        try await startServer()
        let browser = Browser(self)
        try await browser.login()
        for (path, text) in [("/queues/nosuchqueue", "There is no queue nosuchqueue."),
                             ("/destinations/nosuch.example", "No job, setting or attempt of the last hour has the host nosuch.example."),
                             ("/queues/%3Cb%3Ex", "There is no queue &lt;b&gt;x."),
                             ("/queues/%ZZ", nil), ("/destinations/%E0%A4%A", nil)] as [(String, String?)] {
            let page = try await browser.get(path)
            XCTAssertEqual(page.status, 404, path)
            if let text { XCTAssertTrue(page.body.contains(text), "\(path): \(page.body)") }
            XCTAssertFalse(page.body.contains("<b>x"), path)
            XCTAssertEqual(page.headers.first(name: "content-security-policy"), SecurityHeaders.contentSecurityPolicy, path)
        }
    }

    func testHostileQueueAndHostNamesAreEscapedAndStillReachTheirPages() async throws {
        let queue = #"<script>alert("q")</script>/x?y#z"#
        let host = #"<img src=x onerror=alert(1)>"#
        // The tables refuse such a queue name (`check_job_settings`, `queues_name_valid`) and
        // hosts are what `courier.url_host` makes of a URL, but the pages must not trust that:
        // the maintained counts and the destinations table take any text.
        try connection.query("INSERT INTO courier.job_counts (queue, state, jobs) VALUES ($1, 'succeeded', 1)", [queue])
        try connection.query(
            "INSERT INTO courier.destinations (host, disabled_at, disabled_reason) VALUES ($1, now(), $2)",
            [host, "<script>alert(2)</script>"])
        try await startServer()
        let browser = Browser(self)
        try await browser.login()
        let queuePath = "/queues/%3Cscript%3Ealert%28%22q%22%29%3C%2Fscript%3E%2Fx%3Fy%23z"
        let hostPath = "/destinations/%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E"
        let overview = try await browser.get("/queues").body
        XCTAssertTrue(overview.contains(#"<a href="\#(queuePath)">"#), overview)
        let list = try await browser.get("/destinations").body
        XCTAssertTrue(list.contains(#"<a href="\#(hostPath)">"#), list)
        var pages = ["/queues": overview, "/destinations": list]
        for path in [queuePath, hostPath] {
            let page = try await browser.get(path)
            XCTAssertEqual(page.status, 200, path)
            pages[path] = page.body
        }
        XCTAssertEqual(figure(try XCTUnwrap(pages[queuePath]), "state", "succeeded"), "1")
        XCTAssertEqual(figure(try XCTUnwrap(pages[queuePath]), "figure", "delivered"), "0")
        XCTAssertTrue(try XCTUnwrap(pages[queuePath]).contains("&lt;script&gt;alert("))
        XCTAssertTrue(try XCTUnwrap(pages[hostPath]).contains("&lt;img src=x onerror=alert(1)&gt;"))
        for (path, html) in pages {
            XCTAssertFalse(html.contains("<script>alert"), path)
            XCTAssertFalse(html.contains("<img src=x"), path)
        }
    }
}
