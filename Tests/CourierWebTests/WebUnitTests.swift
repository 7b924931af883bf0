import CourierCore
import Foundation
import Mustache
import XCTest

@testable import CourierWeb

/// The console's pure parts: forms, cookies, the password check, redaction of bodies, time
/// filters and list queries.
final class WebUnitTests: XCTestCase {
    func testFormDataDecodesLikeABrowserEncodes() {
        let form = FormData("a=1&b=x+y%21&c=%E2%9C%93&d&e=%zz&a=2&=empty")
        XCTAssertEqual(form["a"], "1")
        XCTAssertEqual(form["b"], "x y!")
        XCTAssertEqual(form["c"], "✓")
        XCTAssertEqual(form["d"], "")
        XCTAssertEqual(form["e"], "%zz")
        XCTAssertNil(form.nonEmpty("d"))
        XCTAssertEqual(FormData("%FF%FE")[String(decoding: [0xFF, 0xFE], as: UTF8.self)], "")
        XCTAssertEqual(FormData(String(repeating: "a=1&", count: 500)[...]).pairs.count, 100)
        XCTAssertEqual(FormData.query([("queue", "a b&c"), ("state", nil), ("url", "")]), "queue=a%20b%26c")
        let round = FormData(Substring(FormData.query([("x", "ünï/?&=+ %")])))
        XCTAssertEqual(round["x"], "ünï/?&=+ %")
    }

    func testCookies() {
        XCTAssertEqual(CookieHeader.value(of: "courier_session", in: "a=1; courier_session=abc; b=2"), "abc")
        XCTAssertNil(CookieHeader.value(of: "courier_session", in: "xcourier_session=abc"))
        XCTAssertNil(CookieHeader.value(of: "courier_session", in: nil))
        XCTAssertEqual(CookieHeader.setCookie(name: "s", value: "v", secure: false), "s=v; Path=/; HttpOnly; SameSite=Strict")
        XCTAssertEqual(CookieHeader.setCookie(name: "s", value: "", secure: true),
                       "s=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Secure")
    }

    func testPasswordIsCheckedAgainstAKeyedHashAndRefusesWeakFiles() throws {
        let password = try WebPassword(fileContents: "correct horse battery staple\n")
        XCTAssertTrue(password.matches("correct horse battery staple"))
        XCTAssertFalse(password.matches("correct horse battery staple\n"))
        XCTAssertFalse(password.matches("correct horse battery stapl"))
        XCTAssertFalse(password.matches(""))
        XCTAssertTrue(try WebPassword(fileContents: "correct horse battery staple\r\n").matches("correct horse battery staple"))
        XCTAssertThrowsError(try WebPassword(fileContents: "short\n"))
        XCTAssertThrowsError(try WebPassword(fileContents: "first line is long\nsecond line\n"))
        XCTAssertThrowsError(try WebPassword(fileContents: ""))
        // Nothing printable holds the secret.
        XCTAssertFalse(String(describing: password).contains("horse"))
        XCTAssertFalse(String(reflecting: password).contains("horse"))
        XCTAssertTrue(ConstantTime.equal("abc", "abc"))
        XCTAssertFalse(ConstantTime.equal("abc", "abd"))
        XCTAssertFalse(ConstantTime.equal("abc", "abcd"))
    }

    func testSessionsExpireAndTokensAreRandom() {
        let store = SessionStore(idleTimeout: .seconds(60))
        let now = Date()
        let (cookie, session) = store.create(name: "alice", now: now)
        XCTAssertNotEqual(cookie, session.csrfToken)
        XCTAssertEqual(cookie.count, 43)
        XCTAssertEqual(store.session(for: cookie, now: now.addingTimeInterval(59))?.name, "alice")
        XCTAssertEqual(store.session(for: cookie, now: now.addingTimeInterval(118))?.name, "alice", "use extends it")
        XCTAssertNil(store.session(for: cookie, now: now.addingTimeInterval(200)))
        XCTAssertNil(store.session(for: cookie, now: now.addingTimeInterval(201)), "an expired session is gone")
        XCTAssertNil(store.session(for: "unknown"))
        XCTAssertEqual(Set((0..<100).map { _ in SessionStore.randomToken() }).count, 100)
        let (other, _) = store.create(name: "bob")
        store.setNotice(other, "done")
        XCTAssertEqual(store.takeNotice(other), "done")
        XCTAssertNil(store.takeNotice(other))
        store.remove(other)
        XCTAssertNil(store.session(for: other))
    }

    func testLoginTriesAreLimitedPerAddressWithinTheWindow() {
        var failures = LoginFailures(limit: 3, window: .seconds(60), capacity: 2)
        let start = Date()
        for second in 0..<3 { XCTAssertNil(failures.admit("10.0.0.1", now: start.addingTimeInterval(Double(second)))) }
        // The fourth try within the window is refused until the first try is 60 s old.
        XCTAssertEqual(failures.admit("10.0.0.1", now: start.addingTimeInterval(10)), start.addingTimeInterval(60))
        XCTAssertEqual(failures.admit("10.0.0.1", now: start.addingTimeInterval(59)), start.addingTimeInterval(60))
        XCTAssertNil(failures.admit("10.0.0.2", now: start.addingTimeInterval(10)), "another address is not affected")
        XCTAssertNil(failures.admit("10.0.0.1", now: start.addingTimeInterval(60)), "the first try aged out")
        XCTAssertNotNil(failures.admit("10.0.0.1", now: start.addingTimeInterval(60.5)))
        // A correct password forgets the address's tries.
        failures.succeeded("10.0.0.1")
        for _ in 0..<3 { XCTAssertNil(failures.admit("10.0.0.1", now: start.addingTimeInterval(61))) }
        // At capacity the address whose last try is oldest is forgotten first.
        XCTAssertEqual(failures.addresses, 2)
        XCTAssertNil(failures.admit("10.0.0.3", now: start.addingTimeInterval(62)))
        XCTAssertEqual(failures.addresses, 2)
        XCTAssertNotNil(failures.admit("10.0.0.1", now: start.addingTimeInterval(62)), "the newer address is kept")
        XCTAssertNil(failures.admit("10.0.0.2", now: start.addingTimeInterval(62)), "the older one was dropped")
    }

    func testBodiesLoseSecretMembersPairsAndURLCredentials() {
        let json = """
            {"event": "paid", "password": "p1", "Api-Key": 12345, "nested": {"token": {"a": "p2"}, "list": ["x"]},
             "auth": ["p3", "p4"], "ok": true, "url": "https://u:p5@h.example/x?sig=p6&v=1", "escaped": "a\\"password\\": \\"p7"}
            """
        let shown = BodyRedaction.show(Array(json.utf8)).text
        for secret in ["p1", "12345", "p2", "p3", "p4", "p5", "p6"] { XCTAssertFalse(shown.contains(secret), "\(secret): \(shown)") }
        for visible in ["paid", "\"ok\": true", "\"list\": [\"x\"]", "h.example", "v=1"] {
            XCTAssertTrue(shown.contains(visible), "\(visible): \(shown)")
        }
        XCTAssertTrue(shown.contains("\"password\": \"***\""), shown)
        let form = BodyRedaction.show(Array("user=ann&password=hunter22&client_secret=s3&x=1".utf8)).text
        XCTAssertFalse(form.contains("hunter22"))
        XCTAssertFalse(form.contains("s3"))
        XCTAssertTrue(form.contains("user=ann"))
        let lines = BodyRedaction.show(Array("line one\nAuthorization-Token: abc\u{1B}[31m\nline three".utf8)).text
        XCTAssertEqual(lines.split(separator: "\n").count, 3)
        XCTAssertFalse(lines.contains("abc"))
        XCTAssertFalse(lines.contains("\u{1B}"))
        XCTAssertEqual(BodyRedaction.show([0x61, 0xFF, 0x62, 0xE2, 0x9C, 0x93]).text, "a\\xFFb✓")
        let big = BodyRedaction.show(Array(repeating: 0x61, count: 10_000), limit: 100)
        XCTAssertTrue(big.clipped)
        XCTAssertEqual(big.text.count, 100)
        // Unterminated JSON does not crash and still hides what follows a secret name.
        XCTAssertFalse(BodyRedaction.show(Array(#"{"token": "abc"#.utf8)).text.contains("abc"))
        XCTAssertFalse(BodyRedaction.show(Array(#"{"token": {"a": ["abc""#.utf8)).text.contains("abc"))
    }

    func testTimeFilters() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        XCTAssertEqual(PageFormat.parseTime("2h", now: now), now.addingTimeInterval(-7200))
        XCTAssertEqual(PageFormat.parseTime("30m", now: now), now.addingTimeInterval(-1800))
        XCTAssertEqual(PageFormat.parseTime("1.5d", now: now), now.addingTimeInterval(-129_600))
        XCTAssertEqual(PageFormat.parseTime("2026-11-23", now: now)?.timeIntervalSince1970, 1_795_392_000)
        XCTAssertEqual(PageFormat.parseTime("2026-11-23T10:00", now: now)?.timeIntervalSince1970, 1_795_428_000)
        XCTAssertEqual(PageFormat.parseTime("2026-11-23 10:00:05", now: now)?.timeIntervalSince1970, 1_795_428_005)
        XCTAssertEqual(PageFormat.parseTime("2026-11-23T10:00:00+01:00", now: now)?.timeIntervalSince1970, 1_795_424_400)
        for bad in ["", "yesterday", "-2h", "1e9d", "2026-13-01", "10000-01-01", "2h30m", "nand"] {
            XCTAssertNil(PageFormat.parseTime(bad, now: now), bad)
        }
        XCTAssertEqual(PageFormat.age(0), "0s")
        XCTAssertEqual(PageFormat.age(303), "5m 3s")
        XCTAssertEqual(PageFormat.age(7_800), "2h 10m")
        XCTAssertEqual(PageFormat.age(.infinity), "∞")
        XCTAssertEqual(PageFormat.milliseconds(12.4), "12 ms")
        XCTAssertEqual(PageFormat.milliseconds(1500), "1.5 s")
    }

    func testListQueriesReadFiltersAndTheCursor() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let jobs = JobListQuery(FormData("queue=billing&state=retrying&host=B.Example&url=%2Fhook&since=1h&before=42&error=x"),
                                dead: false, now: now)
        XCTAssertEqual(jobs.problems, [])
        XCTAssertEqual(jobs.filter.queue, "billing")
        XCTAssertEqual(jobs.filter.state, .retrying)
        XCTAssertEqual(jobs.filter.host, "b.example")
        XCTAssertEqual(jobs.filter.urlContains, "/hook")
        XCTAssertNil(jobs.filter.errorContains, "jobs do not filter by error")
        XCTAssertEqual(jobs.filter.createdSince, now.addingTimeInterval(-3600))
        XCTAssertNil(jobs.filter.finishedSince)
        XCTAssertEqual(jobs.before, 42)
        XCTAssertEqual(WebApp.queryString(jobs.linkPairs(before: 7)),
                       "?queue=billing&state=retrying&host=B.Example&url=%2Fhook&since=1h&before=7")

        let dead = JobListQuery(FormData("queue=billing&state=pending&host=x&error=503&until=2026-11-23"), dead: true, now: now)
        XCTAssertEqual(dead.filter.state, .dead, "the dead list shows dead jobs whatever the query says")
        XCTAssertNil(dead.filter.host)
        XCTAssertEqual(dead.deadFilter.queue, "billing")
        XCTAssertEqual(dead.deadFilter.errorContains, "503")
        XCTAssertEqual(dead.deadFilter.failedBefore?.timeIntervalSince1970, 1_795_392_000)
        XCTAssertEqual(dead.formPairs.map(\.0), ["queue", "error", "until"])
        XCTAssertEqual(dead.description, #"in queue billing, with an error containing "503", dead before 2026-11-23 00:00:00 UTC"#)

        XCTAssertEqual(JobListQuery(FormData("state=nope"), dead: false).problems.count, 1)
        XCTAssertEqual(JobListQuery(FormData("before=-1"), dead: false).problems.count, 1)
        XCTAssertEqual(JobListQuery(FormData("host=a%20b"), dead: false).problems.count, 1)
        XCTAssertEqual(JobListQuery(FormData("since=soon"), dead: true).problems.count, 1)
    }

    func testPathsAndRedirectTargets() {
        // The router matches `/jobs/:id` and `/jobs/:id/requeue`; the id must be a positive
        // decimal number. The same paths over HTTP: `WebRouterTests.testPathsThatAreNoJobAreNotFound`.
        XCTAssertEqual(JobsArea.jobID("42"), 42)
        for bad in ["", "0", "-1", "abc", "٤٢", "99999999999999999999", nil] {
            XCTAssertNil(JobsArea.jobID(bad), String(describing: bad))
        }
        XCTAssertEqual(WebApp.localPath("/dead?queue=a"), "/dead?queue=a")
        for bad in ["//evil.example", "https://evil.example", "/\\evil.example", "evil", "/a\nb", nil] {
            XCTAssertNil(WebApp.localPath(bad), String(describing: bad))
        }
    }

    func testTrafficChartDrawsOneBarPerMinuteAndNeverAPeakOfNothing() throws {
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)  // 08:00 UTC, a whole minute
        let quiet = Traffic(minutes: (0..<60).map { TrafficMinute(start: t0.addingTimeInterval(Double($0) * 60), delivered: 0, failed: 0) })
        let empty = TrafficChart(quiet)
        XCTAssertEqual(empty.bars.count, 60)
        XCTAssertFalse(empty.hasAttempts)
        XCTAssertEqual(empty.summary, "No attempt finished in the last hour.")
        XCTAssertTrue(empty.bars.allSatisfy { $0.deliveredHeight == "0.0" && $0.failedHeight == "0.0" })
        XCTAssertEqual(TrafficView(quiet, scope: "all queues").errorRate, "none")

        var minutes = quiet.minutes
        minutes[10].delivered = 40
        minutes[10].failed = 10
        minutes[59].delivered = 1  // this minute so far
        let busy = Traffic(minutes: minutes, p50: 12, p95: 250, p99: 1500)
        let chart = TrafficChart(busy)
        XCTAssertEqual(chart.scale, 50)
        XCTAssertEqual(chart.bars[10].deliveredHeight, "64.0")  // 40 of 50 in 80 units
        XCTAssertEqual(chart.bars[10].failedHeight, "16.0")
        XCTAssertEqual(chart.bars[10].failedY, "0.0")
        XCTAssertEqual(chart.bars[59].deliveredHeight, "1.6")
        XCTAssertEqual(chart.bars[1].x, "10.0")
        XCTAssertEqual(chart.bars[10].title, "08:10 UTC: 40 delivered, 10 failed")
        XCTAssertEqual(chart.bars[59].title, "08:59 UTC (this minute so far): 1 delivered, 0 failed")
        XCTAssertEqual(chart.summary, "41 delivered and 10 failed in the last hour (20% failed); busiest minute 08:10 UTC with 50.")
        let view = TrafficView(busy, scope: "this queue")
        XCTAssertEqual(view.errorRate, "20%")
        XCTAssertEqual([view.p50, view.p95, view.p99], ["12 ms", "250 ms", "1.5 s"])
        // One attempt in a thousand still shows: a bar of at least one unit, a rate with a decimal.
        XCTAssertEqual(TrafficChart.barHeight(1, peak: 1000), 1)
        XCTAssertEqual(TrafficChart.percent(0.004), "0.4%")
    }

    func testConsolePathsCarryAnyNameInOneSegment() {
        XCTAssertEqual(ConsolePath.queue("billing.v2"), "/queues/billing.v2")
        XCTAssertEqual(ConsolePath.queue("a/b?c#d <x>\"e\""), "/queues/a%2Fb%3Fc%23d%20%3Cx%3E%22e%22")
        XCTAssertEqual(ConsolePath.destination("hooks.example"), "/destinations/hooks.example")
        XCTAssertNil(ConsolePath.queue(".."))
        XCTAssertNil(ConsolePath.queue("."))
        XCTAssertEqual(ConsolePath.decode("a%2Fb%3Fc%23d%20%3Cx%3E%22e%22"), "a/b?c#d <x>\"e\"")
        XCTAssertNil(ConsolePath.decode("%E0%A4%A"))
        XCTAssertNil(ConsolePath.decode(""))
        XCTAssertNil(ConsolePath.decode(nil))
    }

    func testJSONLayoutReindentsWithoutParsing() {
        let stored = #"{"a": [1, {"b": "x, y: {z} [w]"}], "c": {}, "d": "q\"}", "e": [ ], "n": 12345678901234567890.10}"#
        XCTAssertEqual(JSONLayout.pretty(stored), """
            {
              "a": [
                1,
                {
                  "b": "x, y: {z} [w]"
                }
              ],
              "c": {},
              "d": "q\\"}",
              "e": [],
              "n": 12345678901234567890.10
            }
            """)
        XCTAssertEqual(JSONLayout.pretty("42"), "42")
        XCTAssertEqual(JSONLayout.pretty(#""a\"b""#), #""a\"b""#)
        // Cut-off text and text that is not JSON still come out, laid out as far as they go.
        XCTAssertEqual(JSONLayout.pretty(#"{"a": [1, 2"#), "{\n  \"a\": [\n    1,\n    2")
        XCTAssertEqual(JSONLayout.pretty("}} not json"), "\n}\n}notjson")
    }

    func testTemplatesEscapeWhatTheDatabaseHolds() throws {
        let library = try Templates.library()
        let html = library.render([
            "heading": "Jobs", "hasJobs": true, "csrf": "t",
            "jobs": [["id": "1", "queue": "<script>alert(1)</script>", "state": "dead", "method": "POST",
                      "url": "https://x.example/\"><img src=x>", "attempt": 1, "maxAttempts": 5, "time": "now"]],
        ] as [String: Any], withTemplate: "jobs") ?? ""
        XCTAssertTrue(html.contains("<tr data-job=\"1\">"), html)
        XCTAssertFalse(html.contains("<script>alert"))
        XCTAssertFalse(html.contains("<img"))
        XCTAssertTrue(html.contains("&lt;script&gt;"))
        XCTAssertTrue(html.contains("&quot;&gt;&lt;img"))
    }
}
