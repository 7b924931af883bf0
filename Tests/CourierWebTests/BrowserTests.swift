import AsyncHTTPClient
import CourierCLISupport
import CourierCore
import Foundation
import NIOCore
import XCTest

/// The console in a real browser: headless Chromium driven through chromedriver's WebDriver
/// HTTP interface (a few JSON calls, no client library). `scripts/test` installs `chromium`
/// and `chromium-driver`; without them the tests are skipped on a laptop and fail under CI.
final class BrowserTests: WebTestCase {
    func testOperatorLogsInChecksCountsAndRequeuesADeadJob() async throws {
        let driver = try await WebDriver.start(http: http)
        defer { driver.stop() }
        try seedQueues()
        let dead = try insertJob(queue: "billing", state: .dead, url: "https://api.example/hooks/invoice",
                                 headers: #"{"Authorization": "Bearer SECRETBROWSER1", "X-Tenant": "acme"}"#,
                                 body: #"{"event": "invoice.paid", "id": 42}"#, createdSecondsAgo: 600, lastError: "HTTP 503")
        try insertAttempt(job: dead, attempt: 1, status: 503, error: "HTTP 503", response: "upstream busy")
        try insertAttempt(job: dead, attempt: 2, status: 503, error: "HTTP 503", response: "upstream busy")
        try seedHourOfAttempts()
        try foldCounts()
        try await startServer(liveInterval: .milliseconds(500))
        let session = try await driver.newSession()

        // Every page asks for a login first.
        try await session.navigate(base + "/queues")
        try await session.type("#name", "alice")
        try await session.type("#password", WebTestCase.password)
        try await session.click("form.login button")
        // The login page was served at /queues itself, so the address alone does not say the
        // queue page has replaced it: wait for its table.
        _ = try await session.element("table#queues")
        try await session.waitForURL { $0.hasSuffix("/queues") }

        // The queue's counts are the database's.
        let expected = try connection.query(
            "SELECT state::text, jobs::int FROM courier.queue_stats WHERE queue = 'billing'").rows
        XCTAssertFalse(expected.isEmpty)
        for row in expected {
            let state: String = try row.decode(0)
            guard ["pending", "running", "retrying", "dead"].contains(state) else { continue }
            let shown = try await session.text(#"tr[data-queue="billing"] td[data-field="\#(state)"]"#)
            XCTAssertEqual(shown, String(try row.decode(1, as: Int.self)), state)
        }
        // The README's screenshot is rewritten only on request (COURIER_UPDATE_SCREENSHOTS=1), so
        // a test run leaves the work tree as it found it; otherwise it goes to a temporary file.
        let update = ProcessInfo.processInfo.environment["COURIER_UPDATE_SCREENSHOTS"] == "1"
        let shot = update
            ? WebTestCase.repositoryRoot.appendingPathComponent("docs/images/web-queues.png")
            : FileManager.default.temporaryDirectory.appendingPathComponent("courier-web-queues-\(UUID().uuidString).png")
        defer { if !update { try? FileManager.default.removeItem(at: shot) } }
        try await session.screenshot(to: shot)
        let png = try Data(contentsOf: shot)
        XCTAssertEqual(Array(png.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "a PNG")
        XCTAssertGreaterThan(png.count, 10_000)

        // A request without the CSRF token is refused, even from the logged-in page.
        let forged = try await session.fetchStatus(path: "/queues/pause", form: "queue=billing")
        XCTAssertEqual(forged, 403)
        XCTAssertEqual(try connection.query("SELECT count(*)::int FROM courier.queues WHERE paused AND name = 'billing'")[0].decode(0, as: Int.self), 0)

        // The dead job, its attempts, and a requeue.
        try await session.navigate(base + "/dead?queue=billing")
        try await session.click(#"a[href="/jobs/\#(dead)"]"#)
        try await session.waitForURL { $0.hasSuffix("/jobs/\(dead)") }
        let attempts = try await session.elements("#attempts li")
        XCTAssertEqual(attempts.count, 2)
        let timeline = try await session.text("#attempts")
        XCTAssertTrue(timeline.contains("HTTP 503"), timeline)
        XCTAssertTrue(timeline.contains("upstream busy"), timeline)
        let page = try await session.source()
        XCTAssertFalse(page.contains("SECRETBROWSER1"))
        try await session.click(#"form[action="/jobs/\#(dead)/requeue"] button"#)
        // The answer redirects to the same address, so wait for the notice rather than the URL.
        try await session.waitFor { try await session.text("main").contains("requeued: it is due now") }
        try await session.waitForURL { $0.hasSuffix("/jobs/\(dead)") }
        let row = try connection.query(
            "SELECT state::text, run_at <= now() FROM courier.jobs WHERE id = $1", [dead])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "pending")
        XCTAssertEqual(try row.decode(1, as: Bool.self), true)
        XCTAssertEqual(try connection.query(
            "SELECT count(*)::int FROM courier.web_audit WHERE who = 'alice' AND action = 'job.requeue'")[0].decode(0, as: Int.self), 1)

        // The queue page keeps itself current: the live script writes new counts in.
        try await session.navigate(base + "/queues")
        try connection.query("UPDATE courier.jobs SET state = 'dead', finished_at = now() WHERE id = $1", [dead])
        try foldCounts()
        let deadNow: Int = try connection.query(
            "SELECT jobs::int FROM courier.queue_stats WHERE queue = 'billing' AND state = 'dead'")[0].decode(0)
        try await session.waitFor { try await session.text(#"tr[data-queue="billing"] td[data-field="dead"]"#) == String(deadNow) }
        let liveStatus = try await session.text("#live-status").hasPrefix("Live")
        XCTAssertTrue(liveStatus)
        try await session.close()
    }

    func testReadOnlyConsoleShowsNoActionAndRefusesAForgedPost() async throws {
        let driver = try await WebDriver.start(http: http)
        defer { driver.stop() }
        try seedQueues()
        let dead = try insertJob(queue: "billing", state: .dead, lastError: "HTTP 500")
        try foldCounts()
        try await startServer(readOnly: true)
        let session = try await driver.newSession()
        try await session.navigate(base + "/login")
        try await session.type("#name", "auditor")
        try await session.type("#password", WebTestCase.password)
        try await session.click("form.login button")
        try await session.waitForURL { $0.hasSuffix("/queues") }
        for path in ["/queues", "/dead", "/jobs/\(dead)", "/destinations", "/endpoints", "/messages"] {
            try await session.navigate(base + path)
            // Only the filter form (a GET) has a button.
            let actionButtons = try await session.elements("main form:not(.filters) button").count
            XCTAssertEqual(actionButtons, 0, path)
            let postForms = try await session.elements("main form[method=post]").count
            XCTAssertEqual(postForms, 0, path)
        }
        // A forged POST with the page's own valid token is still refused.
        let token = try await session.attribute(#"form.logout input[name="csrf"]"#, "value")
        let status = try await session.fetchStatus(path: "/jobs/\(dead)/requeue", form: "csrf=\(token)")
        XCTAssertEqual(status, 403)
        XCTAssertEqual(try connection.query("SELECT state::text FROM courier.jobs WHERE id = $1", [dead])[0].decode(0, as: String.self), "dead")
        try await session.close()
    }

    func testEndpointsAndAMessageOpenFromTheNavigation() async throws {
        let driver = try await WebDriver.start(http: http)
        defer { driver.stop() }
        let webhooks = WebhookStore(connection: connection)
        let endpoint = try webhooks.addEndpoint(
            NewEndpoint(url: "https://receiver.example/hooks", eventTypes: ["invoice.*"], tenant: "acme",
                        headers: [("X-Token", "SECRETBROWSERHEADER")]),
            seal: { _ in Array(repeating: 7, count: 40) })
        let message = try webhooks.publish(eventType: "invoice.paid", payload: #"{"id": 42}"#, tenant: "acme")
        try await startServer()
        let session = try await driver.newSession()
        try await session.navigate(base + "/login")
        try await session.type("#name", "alice")
        try await session.type("#password", WebTestCase.password)
        try await session.click("form.login button")
        try await session.waitForURL { $0.hasSuffix("/queues") }

        try await session.click(#"nav a[href="/endpoints"]"#)
        _ = try await session.element("table#endpoints")
        let row = try await session.text(#"tr[data-endpoint="\#(endpoint)"]"#)
        XCTAssertTrue(row.contains("https://receiver.example/hooks"), row)
        XCTAssertTrue(row.contains("0 / 0 / 1"), row)
        try await session.click(#"a[href="/endpoints/\#(endpoint)"]"#)
        try await session.waitForURL { $0.hasSuffix("/endpoints/\(endpoint)") }
        let secrets = try await session.text("#secrets")
        XCTAssertTrue(secrets.hasPrefix("1 valid"), secrets)
        let needsKey = try await session.text("#rotation-needs-key")
        XCTAssertTrue(needsKey.contains("COURIER_SECRETS_KEY_FILE"), needsKey)
        let source = try await session.source()
        XCTAssertFalse(source.contains("SECRETBROWSERHEADER"))
        try await session.click(#"#deliveries a[href="/messages/\#(message.messageID)"]"#)
        try await session.waitForURL { $0.hasSuffix("/messages/\(message.messageID)") }
        let payload = try await session.text("#payload")
        XCTAssertTrue(payload.contains("\"id\": 42"), payload)
        try await session.close()
    }

    /// The queue, host, job and dead-letter pages at a 1280-pixel desktop and a 390-pixel
    /// phone: no sideways scroll of the page, no cell whose content overflows its column,
    /// headers aligned like their values, date fields wide enough for their placeholders, URL
    /// cells wide enough to read, and a screenshot of the queue page at each width.
    func testPagesFitADesktopAndAPhone() async throws {
        let driver = try await WebDriver.start(http: http)
        defer { driver.stop() }
        try seedQueues()
        try seedHourOfAttempts()
        let long = "https://hooks.partner-integration.example.com/v2/webhooks/incoming/"
            + "customer-7f3a9c1e-5b2d-4e8f-a6c0-91d2e3f4a5b6/events?source=billing-reconciliation&region=eu-west-1"
        for _ in 0..<3 { try insertJob(queue: "billing", state: .dead, url: long, lastError: "HTTP 503 from \(long): upstream unavailable, retry later") }
        try insertJob(queue: "billing", url: long)
        try connection.query(
            """
            INSERT INTO courier.destinations (host, max_in_flight, rate_limit, disabled_at, disabled_reason)
            VALUES ('hooks.partner-integration.example.com', 20, 50, now(),
                    'disabled in the web console by alice: their TLS certificate expired on the 23rd')
            """)
        try foldCounts()
        try await startServer()
        let session = try await driver.newSession()
        try await session.navigate(base + "/login")
        try await session.type("#name", "alice")
        try await session.type("#password", WebTestCase.password)
        try await session.click("form.login button")
        try await session.waitForURL { $0.hasSuffix("/queues") }

        let update = ProcessInfo.processInfo.environment["COURIER_UPDATE_SCREENSHOTS"] == "1"
        let shots = FileManager.default.temporaryDirectory.appendingPathComponent("courier-web-shots-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: shots) }
        let pages = ["/queues", "/queues/billing", "/destinations", "/destinations/hooks.partner-integration.example.com",
                     "/jobs?queue=billing", "/dead", "/jobs/1"]
        for (device, width, height) in [("desktop", 1280, 900), ("phone", 390, 844)] {
            try await session.emulate(width: width, height: height, mobile: device == "phone")
            for path in pages {
                try await session.navigate(base + path)
                _ = try await session.element("main h1")
                let viewport = try await session.execute("return window.innerWidth;") as? NSNumber
                XCTAssertEqual(viewport?.intValue, width, "\(device) \(path)")
                let problems = try await session.execute(Self.layoutCheck) as? [String] ?? ["the check did not run"]
                XCTAssertEqual(problems, [], "\(device) \(path)")
            }
            // The filter form: every field readable, the buttons together on one line.
            try await session.navigate(base + "/jobs")
            let form = try await session.execute(Self.filterCheck) as? [String] ?? ["the check did not run"]
            XCTAssertEqual(form, [], device)

            try await session.navigate(base + "/queues/billing")
            _ = try await session.element("#traffic-chart")
            let bars = try await session.elements("#traffic-chart rect.ok").count
            XCTAssertEqual(bars, 60, device)
            let shot = shots.appendingPathComponent("queue-\(device).png")
            try await session.screenshot(to: shot)
            let png = try Data(contentsOf: shot)
            XCTAssertEqual(Array(png.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "a PNG")
            XCTAssertGreaterThan(png.count, 10_000)
            if update {
                let kept = WebTestCase.repositoryRoot.appendingPathComponent("docs/images/web-queue-\(device).png")
                try? FileManager.default.removeItem(at: kept)
                try FileManager.default.copyItem(at: shot, to: kept)
            }
        }
        try await session.close()
    }

    /// What is wrong with the page's layout, as a list of sentences (empty: nothing). Run in
    /// the page through WebDriver.
    static let layoutCheck = """
        const problems = [];
        const root = document.documentElement;
        if (root.scrollWidth > root.clientWidth) {
          problems.push("the page scrolls sideways: " + root.scrollWidth + " > " + root.clientWidth);
        }
        const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && el.className.baseVal === undefined ? "." + el.className : "");
        document.querySelectorAll("table th, table td").forEach((cell) => {
          if (cell.scrollWidth > cell.clientWidth) {
            problems.push("cell overflows its column: " + name(cell) + " " + JSON.stringify(cell.textContent.trim().slice(0, 40)) + " " + cell.scrollWidth + " > " + cell.clientWidth);
          }
          for (const child of cell.children) {
            const c = child.getBoundingClientRect(), r = cell.getBoundingClientRect();
            if (c.right > r.right + 0.5 || c.left < r.left - 0.5) {
              problems.push("content sticks out of its cell: " + name(child) + " in " + JSON.stringify(cell.textContent.trim().slice(0, 40)));
            }
          }
        });
        document.querySelectorAll("table").forEach((table) => {
          const heads = table.querySelectorAll("thead th");
          const row = table.querySelector("tbody tr");
          if (!row) { return; }
          for (let i = 0; i < heads.length && i < row.children.length; i++) {
            const a = getComputedStyle(heads[i]).textAlign, b = getComputedStyle(row.children[i]).textAlign;
            if (a !== b) { problems.push("table#" + table.id + " column " + JSON.stringify(heads[i].textContent) + ": header " + a + ", values " + b); }
          }
        });
        document.querySelectorAll("main *").forEach((el) => {
          if (el.closest(".wrap") || el.closest("svg")) { return; }
          const r = el.getBoundingClientRect();
          if (r.width > 0 && r.right > root.clientWidth + 0.5) { problems.push("sticks out of the page: " + name(el) + " to " + Math.round(r.right)); }
        });
        document.querySelectorAll("td.url").forEach((cell) => {
          if (cell.clientWidth < 180) { problems.push("a URL squeezed into " + cell.clientWidth + " px"); }
        });
        return problems;
        """

    /// The filter form's fields: none narrower than 120 px, date fields wide enough for their
    /// placeholders, each label above its field, and the two buttons on one line.
    static let filterCheck = """
        const problems = [];
        const canvas = document.createElement("canvas").getContext("2d");
        document.querySelectorAll("form.filters p").forEach((p) => {
          const r = p.getBoundingClientRect();
          if (!p.classList.contains("buttons") && r.width < 120) { problems.push("narrow field: " + p.textContent.trim() + " " + r.width); }
          const label = p.querySelector("label"), field = p.querySelector("input, select");
          if (label && field && label.getBoundingClientRect().bottom > field.getBoundingClientRect().top + 0.5) {
            problems.push("label beside its field: " + label.textContent);
          }
        });
        document.querySelectorAll("form.filters input[placeholder]").forEach((input) => {
          const style = getComputedStyle(input);
          canvas.font = style.font;
          const needed = canvas.measureText(input.placeholder).width + parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
          if (input.clientWidth < needed) { problems.push("placeholder cut: #" + input.id + " " + input.clientWidth + " < " + Math.ceil(needed)); }
        });
        const buttons = document.querySelector("form.filters p.buttons");
        const submit = buttons.querySelector("button").getBoundingClientRect(), clear = buttons.querySelector("a").getBoundingClientRect();
        if (Math.abs(submit.top + submit.height / 2 - (clear.top + clear.height / 2)) > 4) { problems.push("Filter and Clear on two lines"); }
        return problems;
        """

    /// An hour of attempts over billing and emails, so the charts have something to draw.
    private func seedHourOfAttempts() throws {
        let billing = try insertJob(queue: "billing", state: .succeeded, url: "https://api.example/hooks/invoice")
        let emails = try insertJob(queue: "emails", state: .succeeded, url: "https://mail.example/send")
        try connection.query(
            """
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, error, worker)
            SELECT CASE WHEN k % 3 = 0 THEN $2::bigint ELSE $1::bigint END, 1, now() - m * interval '1 minute', now() - m * interval '1 minute',
                   20 + (m * 37 + k * 11) % 180,
                   CASE WHEN (m BETWEEN 20 AND 24 AND k % 2 = 0) OR k % 17 = 0 THEN 503 ELSE 200 END, NULL, 'worker-1'
            FROM generate_series(0, 58) m, generate_series(1, 8 + (m * 7) % 13) k
            """, [billing, emails])
    }

    /// Three queues with a little of everything, so the screenshot shows a console at work.
    private func seedQueues() throws {
        for _ in 0..<12 { try insertJob(queue: "billing", createdSecondsAgo: 90) }
        for _ in 0..<3 { try insertJob(queue: "billing", state: .running) }
        for _ in 0..<4 { try insertJob(queue: "billing", state: .retrying, createdSecondsAgo: 30, lastError: "HTTP 503") }
        for _ in 0..<40 { try insertJob(queue: "emails", url: "https://mail.example/send", createdSecondsAgo: 5) }
        for _ in 0..<7 { try insertJob(queue: "emails", state: .running, url: "https://mail.example/send") }
        for _ in 0..<2 { try insertJob(queue: "emails", state: .dead, url: "https://mail.example/send", lastError: "HTTP 400") }
        for _ in 0..<25 { try insertJob(queue: "default", state: .succeeded) }
        try connection.query("INSERT INTO courier.queues (name, paused) VALUES ('reports', true)")
    }
}

extension WebTestCase {
    /// The repository's root (for the screenshot the README shows).
    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }
}

/// chromedriver as a child process, spoken to over its W3C WebDriver HTTP interface.
final class WebDriver: @unchecked Sendable {
    let process: Process
    let base: String
    let http: HTTPClient
    let profile: URL

    static func start(http: HTTPClient) async throws -> WebDriver {
        let env = ProcessInfo.processInfo.environment
        let drivers = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        guard let driver = drivers.first(where: { FileManager.default.isExecutableFile(atPath: $0) }),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")
        else {
            let message = "chromium and chromedriver are missing (apt-get install chromium chromium-driver; scripts/test installs them)"
            if env["CI"] == "true" { throw BrowserTestError(message: message + " (CI=true: a missing browser is a failure)") }
            print("warning: SKIPPING browser test: \(message)")
            throw XCTSkip(message)
        }
        let port = try ThrowawayCluster.freePort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: driver)
        process.arguments = ["--port=\(port)", "--allowed-ips=127.0.0.1"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("courier-chromium-\(UUID().uuidString)")
        let driverObject = WebDriver(process: process, base: "http://127.0.0.1:\(port)", http: http, profile: profile)
        let deadline = Date().addingTimeInterval(20)
        while true {
            if let status = try? await driverObject.call("GET", "/status", nil),
                ((status["value"] as? [String: Any])?["ready"] as? Bool) == true
            {
                return driverObject
            }
            guard Date() < deadline else {
                driverObject.stop()
                throw BrowserTestError(message: "chromedriver did not start")
            }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
    }

    private init(process: Process, base: String, http: HTTPClient, profile: URL) {
        self.process = process
        self.base = base
        self.http = http
        self.profile = profile
    }

    func stop() {
        if process.isRunning { process.terminate() }
        waitForExitQuietly(process, seconds: 2)
        // chromedriver inherits the signal mask of the test's thread, where SIGTERM can be
        // blocked: it then outlived every test run. SIGKILL cannot be blocked.
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            waitForExitQuietly(process, seconds: 5)
        }
        try? FileManager.default.removeItem(at: profile)
    }

    private func waitForExitQuietly(_ process: Process, seconds: Double) {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
    }

    /// A headless Chromium session (root needs --no-sandbox).
    func newSession() async throws -> WebDriverSession {
        let capabilities: [String: Any] = [
            "capabilities": [
                "alwaysMatch": [
                    "browserName": "chrome",
                    "goog:chromeOptions": [
                        "binary": "/usr/bin/chromium",
                        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                 "--window-size=1100,760", "--user-data-dir=\(profile.path)", "--force-color-profile=srgb"],
                    ],
                ],
            ],
        ]
        let answer = try await call("POST", "/session", capabilities)
        guard let value = answer["value"] as? [String: Any], let id = value["sessionId"] as? String else {
            throw BrowserTestError(message: "no WebDriver session: \(answer)")
        }
        return WebDriverSession(driver: self, id: id)
    }

    /// One WebDriver command; a WebDriver error is thrown with its message.
    @discardableResult
    func call(_ method: String, _ path: String, _ body: [String: Any]?) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: base + path)
        request.method = .RAW(value: method)
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        }
        let response = try await http.execute(request, timeout: .seconds(60))
        let data = try await response.body.collect(upTo: 64 << 20)
        let object = (try? JSONSerialization.jsonObject(with: Data(data.readableBytesView))) as? [String: Any] ?? [:]
        if response.status.code >= 400 {
            let value = object["value"] as? [String: Any]
            throw BrowserTestError(message: "WebDriver \(method) \(path): \(value?["error"] ?? response.status.code) \(value?["message"] ?? "")")
        }
        return object
    }
}

/// One browser window.
struct WebDriverSession {
    let driver: WebDriver
    let id: String
    static let elementKey = "element-6066-11e4-a52e-4f735466cecf"

    func navigate(_ url: String) async throws {
        try await driver.call("POST", "/session/\(id)/url", ["url": url])
    }

    func currentURL() async throws -> String {
        try await driver.call("GET", "/session/\(id)/url", nil)["value"] as? String ?? ""
    }

    func elements(_ css: String) async throws -> [String] {
        let answer = try await driver.call("POST", "/session/\(id)/elements", ["using": "css selector", "value": css])
        return (answer["value"] as? [[String: Any]] ?? []).compactMap { $0[Self.elementKey] as? String }
    }

    /// The first element `css` selects, waiting up to 10 s for it: a page that a click or a
    /// redirect is still loading may not have it yet. A failure shows what the page says.
    func element(_ css: String) async throws -> String {
        let deadline = Date().addingTimeInterval(10)
        while true {
            if let element = try await elements(css).first { return element }
            guard Date() < deadline else {
                let shown = try await visibleText()
                throw BrowserTestError(
                    message: "no element \(css) at \(try await currentURL()) (\(try await readyState())): \(shown.prefix(2000))")
            }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
    }

    /// The body's text as the user sees it.
    func visibleText() async throws -> String {
        try await execute("return document.body ? document.body.innerText : '(no body)';") as? String ?? ""
    }

    /// `loading`, `interactive` or `complete`.
    func readyState() async throws -> String {
        try await execute("return document.readyState;") as? String ?? ""
    }

    func execute(_ script: String) async throws -> Any? {
        try await driver.call("POST", "/session/\(id)/execute/sync", ["script": script, "args": [Any]()])["value"]
    }

    func type(_ css: String, _ text: String) async throws {
        try await driver.call("POST", "/session/\(id)/element/\(try await element(css))/value", ["text": text])
    }

    func click(_ css: String) async throws {
        try await driver.call("POST", "/session/\(id)/element/\(try await element(css))/click", [:])
    }

    func text(_ css: String) async throws -> String {
        try await driver.call("GET", "/session/\(id)/element/\(try await element(css))/text", nil)["value"] as? String ?? ""
    }

    func attribute(_ css: String, _ name: String) async throws -> String {
        try await driver.call("GET", "/session/\(id)/element/\(try await element(css))/property/\(name)", nil)["value"]
            as? String ?? ""
    }

    func source() async throws -> String {
        try await driver.call("GET", "/session/\(id)/source", nil)["value"] as? String ?? ""
    }

    /// POSTs `form` to `path` from the page (same origin, with the session cookie) and returns the status.
    func fetchStatus(path: String, form: String) async throws -> Int {
        let script = """
            const done = arguments[arguments.length - 1];
            fetch(arguments[0], {method: "POST", body: arguments[1], redirect: "manual",
                                 headers: {"Content-Type": "application/x-www-form-urlencoded"}})
                .then(r => done(r.status)).catch(e => done(-1));
            """
        let answer = try await driver.call("POST", "/session/\(id)/execute/async", ["script": script, "args": [path, form]])
        return (answer["value"] as? NSNumber)?.intValue ?? -2
    }

    /// Lays the page out as a device `width` by `height` CSS pixels wide (a phone with
    /// `mobile`: touch, the viewport meta tag honoured), through Chromium's DevTools.
    func emulate(width: Int, height: Int, mobile: Bool) async throws {
        try await driver.call("POST", "/session/\(id)/goog/cdp/execute", [
            "cmd": "Emulation.setDeviceMetricsOverride",
            "params": ["width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile] as [String: Any],
        ])
    }

    func screenshot(to file: URL) async throws {
        let answer = try await driver.call("GET", "/session/\(id)/screenshot", nil)
        guard let text = answer["value"] as? String, let data = Data(base64Encoded: text) else {
            throw BrowserTestError(message: "no screenshot")
        }
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: file)
    }

    /// Waits until the address meets `condition` and that document has finished loading.
    func waitForURL(_ condition: (String) -> Bool) async throws {
        let deadline = Date().addingTimeInterval(15)
        while true {
            let url = try await currentURL()
            if condition(url), (try? await readyState()) == "complete" { return }
            guard Date() < deadline else { throw BrowserTestError(message: "still at \(url)") }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
    }

    func waitFor(_ condition: () async throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(15)
        while true {
            if (try? await condition()) == true { return }
            guard Date() < deadline else { throw BrowserTestError(message: "condition never held") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
    }

    func close() async throws {
        try await driver.call("DELETE", "/session/\(id)", nil)
    }
}

/// The browser could not be driven.
struct BrowserTestError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
