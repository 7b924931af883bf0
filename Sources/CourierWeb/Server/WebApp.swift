import CourierCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import Postgres

/// The console's request handling: authentication, CSRF, read-only, routing and the pages.
///
/// Only `/login` and the two static files answer without a session. Every other route answers
/// an anonymous GET with the login page and status 401, and anything else anonymous with a
/// bare 401. Every state-changing request is a POST that carries the session's CSRF token;
/// under `readOnly` every such POST (other than logging out) is refused with 403 and no page
/// shows an action.
final class WebApp: Sendable {
    let configuration: WebConfiguration
    let database: WebDatabase
    let sessions: SessionStore
    let throttle: LoginThrottle
    let feed: LiveFeed
    let sampler: DeliverySampler
    let logger: Logger
    private let library: MustacheLibrary

    static let cookieName = "courier_session"
    /// The largest form body read.
    static let maximumBody = 64 * 1024

    init(configuration: WebConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        database = WebDatabase(
            url: configuration.databaseURL, connections: configuration.databaseConnections,
            statementTimeout: configuration.statementTimeout)
        sessions = SessionStore(idleTimeout: configuration.sessionIdleTimeout)
        throttle = LoginThrottle(configuration.loginFailures)
        feed = LiveFeed(database: database, interval: configuration.liveInterval)
        sampler = DeliverySampler(database: database, interval: configuration.deliverySampleInterval)
        library = try Templates.library()
    }

    // MARK: Entry

    /// Answers one request; never throws (a failure is a page).
    func handle(_ request: Request, client: String) async -> Response {
        let path = request.uri.path
        let query = FormData(Substring(request.uri.query ?? ""))
        let secure = configuration.secureCookies
            || request.headers[Self.forwardedProto]?.lowercased() == "https"
        switch (request.method, path) {
        case (.get, "/static/style.css"): return asset(StaticFiles.css, type: "text/css; charset=utf-8")
        case (.get, "/static/live.js"): return asset(StaticFiles.liveJS, type: "text/javascript; charset=utf-8")
        case (.get, "/login"): return loginPage(status: .ok, next: Self.localPath(query["next"]), name: nil, problem: nil)
        case (.post, "/login"): return await login(request, client: client, secure: secure)
        default: break
        }
        guard let cookie = CookieHeader.value(of: Self.cookieName, in: request.headers[.cookie]),
            let session = sessions.session(for: cookie)
        else {
            if request.method == .get && path != "/events" {
                let next = path + (request.uri.query.map { "?" + $0 } ?? "")
                return loginPage(status: .unauthorized, next: Self.localPath(next), name: nil, problem: nil)
            }
            return plain(.unauthorized, "Log in first.")
        }
        var context = PageContext(session: session, cookie: cookie, client: client, path: path, query: query)
        do {
            switch request.method {
            case .post: return try await post(request, &context, secure: secure)
            case .get: return try await get(&context)
            default: return plain(.methodNotAllowed, "Only GET and POST.")
            }
        } catch {
            logger.error("request failed", metadata: ["http.path": "\(Redaction.text(path))", "error": "\(Self.describe(error))"])
            return page("message", ["heading": "Something went wrong", "text": Self.describe(error)],
                        title: "Error", context: context, status: .internalServerError)
        }
    }

    /// A failure as a page may show it: a database error's message, redacted.
    static func describe(_ error: any Error) -> String {
        if let error = error as? PostgresError { return "The database refused: " + Redaction.message(error.message) }
        return Redaction.message(String(describing: error))
    }

    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!

    // MARK: Routing

    private func get(_ context: inout PageContext) async throws -> Response {
        let path = context.path
        switch path {
        case "/": return redirect("/queues")
        case "/queues": return try await queuesPage(&context)
        case "/jobs": return try await jobsPage(&context, dead: false)
        case "/dead": return try await jobsPage(&context, dead: true)
        case "/dead/requeue": return try await requeueAllPage(&context)
        case "/destinations": return try await destinationsPage(&context)
        case "/events": return events()
        default:
            if let id = Self.jobID(path, suffix: "") { return try await jobPage(id, &context) }
            return notFound(&context)
        }
    }

    private func post(_ request: Request, _ context: inout PageContext, secure: Bool) async throws -> Response {
        var request = request
        guard let body = try? await request.collectBody(upTo: Self.maximumBody) else {
            return plain(.contentTooLarge, "The form is too large.")
        }
        context.form = FormData(Substring(String(buffer: body)))
        if context.path != "/logout" && configuration.readOnly {
            logger.notice("refused a change in read-only mode", metadata: ["http.path": "\(Redaction.text(context.path))"])
            return page("message", ["heading": "Read-only", "text": "This console is read-only: it changes nothing."],
                        title: "Read-only", context: context, status: .forbidden)
        }
        guard let token = context.form["csrf"], ConstantTime.equal(token, context.session.csrfToken) else {
            logger.warning("refused a form without a valid CSRF token", metadata: ["client": "\(context.client)"])
            return page("message", ["heading": "Refused", "text": "The form's security token is missing or stale. Reload the page and try again."],
                        title: "Refused", context: context, status: .forbidden)
        }
        switch context.path {
        case "/logout":
            sessions.remove(context.cookie)
            var response = redirect("/login")
            response.headers[.setCookie] = CookieHeader.setCookie(name: Self.cookieName, value: "", secure: secure)
            return response
        case "/queues/pause": return try await setPaused(true, &context)
        case "/queues/resume": return try await setPaused(false, &context)
        case "/dead/requeue": return try await requeueAll(&context)
        case "/destinations/disable": return try await setDestination(enabled: false, &context)
        case "/destinations/enable": return try await setDestination(enabled: true, &context)
        default:
            if let id = Self.jobID(context.path, suffix: "/requeue") { return try await requeueOne(id, &context) }
            return notFound(&context)
        }
    }

    /// The id of `/jobs/<id><suffix>`, or nil.
    static func jobID(_ path: String, suffix: String) -> Int64? {
        guard path.hasPrefix("/jobs/"), path.hasSuffix(suffix) else { return nil }
        let middle = path.dropFirst("/jobs/".count).dropLast(suffix.count)
        guard !middle.isEmpty, middle.allSatisfy(\.isASCII), let id = Int64(middle), id > 0 else { return nil }
        return id
    }

    /// `text` when it is a path of this site (`/x`, not `//host` or `/\host`), else nil.
    static func localPath(_ text: String?) -> String? {
        guard let text, text.hasPrefix("/"), !text.hasPrefix("//"), !text.contains("\\"),
            !text.contains(where: { $0.isNewline || $0 == "\0" }), text.utf8.count <= 2000
        else { return nil }
        return text
    }

    // MARK: Login

    private func loginPage(status: HTTPResponse.Status, next: String?, name: String?, problem: String?) -> Response {
        var values: [String: Any] = ["next": next ?? "/queues"]
        if let name { values["name"] = name }
        let content = library.render(values, withTemplate: "login") ?? ""
        var layout: [String: Any] = ["title": "Log in", "content": content, "csrf": ""]
        if let problem { layout["problem"] = problem }
        if configuration.readOnly { layout["readOnly"] = true }
        return html(status, library.render(layout, withTemplate: "layout") ?? "")
    }

    private func login(_ request: Request, client: String, secure: Bool) async -> Response {
        var request = request
        guard let body = try? await request.collectBody(upTo: Self.maximumBody) else {
            return plain(.contentTooLarge, "The form is too large.")
        }
        let form = FormData(Substring(String(buffer: body)))
        let next = Self.localPath(form["next"]) ?? "/queues"
        let name = Redaction.text(form.nonEmpty("name") ?? "")
        guard !name.isEmpty, name.count <= 100 else {
            return loginPage(status: .badRequest, next: next, name: nil, problem: "Give your name (at most 100 characters).")
        }
        if let until = throttle.admit(client) {
            let seconds = max(1, Int(until.timeIntervalSinceNow.rounded(.up)))
            logger.warning("login refused: too many wrong passwords", metadata: ["client": "\(client)"])
            var response = loginPage(
                status: .tooManyRequests, next: next, name: name,
                problem: "Too many wrong passwords from your address: try again in \(PageFormat.age(Double(seconds))).")
            response.headers[.retryAfter] = String(seconds)
            return response
        }
        guard let password = form["password"], configuration.password.matches(password) else {
            logger.warning("failed login", metadata: ["client": "\(client)"])
            // Guessing costs a second per try and connection, and `throttle` bounds the tries
            // per address however many connections make them.
            try? await Task.sleep(nanoseconds: 1_000_000_000)
            return loginPage(status: .unauthorized, next: next, name: name, problem: "Wrong password.")
        }
        throttle.succeeded(client)
        let (cookie, _) = sessions.create(name: name)
        logger.info("login", metadata: ["who": "\(name)", "client": "\(client)"])
        var response = redirect(next)
        response.headers[.setCookie] = CookieHeader.setCookie(name: Self.cookieName, value: cookie, secure: secure)
        return response
    }

    // MARK: Pages

    private func queuesPage(_ context: inout PageContext) async throws -> Response {
        let queues = try await database.run { try WebStore(connection: $0).queueOverview() }
        let rows: [[String: Any]] = queues.map { queue in
            [
                "name": Redaction.text(queue.name), "query": FormData.encode(queue.name), "paused": queue.paused,
                "pending": queue.jobs[.pending] ?? 0, "running": queue.jobs[.running] ?? 0,
                "retrying": queue.jobs[.retrying] ?? 0, "dead": queue.jobs[.dead] ?? 0,
                "lag": PageFormat.age(queue.lag.seconds),
            ]
        }
        var values: [String: Any] = ["queues": rows, "hasQueues": !rows.isEmpty]
        let perMinute = sampler.perMinute()
        if let line = DeliveryRate.polyline(perMinute, width: 600, height: 60) {
            values["chart"] = [
                "points": line.points, "peak": Int(line.peak.rounded()),
                "last": Int((perMinute.last { $0 != nil } ?? 0)?.rounded() ?? 0),
            ]
        }
        return page("queues", values, title: "Queues", context: context, live: true)
    }

    private func jobsPage(_ context: inout PageContext, dead: Bool) async throws -> Response {
        let parsed = JobListQuery(context.query, dead: dead)
        var values = parsed.templateValues(action: dead ? "/dead" : "/jobs")
        values["heading"] = dead ? "Dead letters" : "Jobs"
        values["timeLabel"] = dead ? "Died" : "Created"
        values["rowActions"] = dead && !configuration.readOnly
        guard parsed.problems.isEmpty else {
            values["hasJobs"] = false
            return page("jobs", values, title: dead ? "Dead letters" : "Jobs", context: context,
                        status: .badRequest, problem: parsed.problems.joined(separator: " "))
        }
        let filter = parsed.filter
        let before = parsed.before
        let limit = configuration.pageSize
        let window = configuration.scanWindow
        let result = try await database.run {
            try WebStore(connection: $0).jobs(filter, before: before, limit: limit, scanWindow: window)
        }
        let jobs = result.jobs
        let back = (dead ? "/dead" : "/jobs") + Self.queryString(parsed.linkPairs(before: before))
        values["back"] = back
        values["jobs"] = jobs.map { job -> [String: Any] in
            var row: [String: Any] = [
                "id": String(job.id), "queue": Redaction.text(job.queue), "state": job.state.rawValue,
                "method": Redaction.text(job.method), "url": Redaction.url(job.url),
                "attempt": job.attempt, "maxAttempts": job.maxAttempts,
            ]
            let time = dead ? (job.finishedAt ?? job.createdAt) : job.createdAt
            row["time"] = PageFormat.time(time)
            if let iso = PageFormat.isoTime(time) { row["timeISO"] = iso }
            if let status = job.lastStatus { row["lastStatus"] = status }
            if let error = job.lastError { row["lastError"] = Self.clip(Redaction.message(error), 160) }
            return row
        }
        values["hasJobs"] = !jobs.isEmpty || result.nextBefore != nil
        if let next = result.nextBefore {
            values["nextPage"] = (dead ? "/dead" : "/jobs") + Self.queryString(parsed.linkPairs(before: next))
        }
        if let lowest = result.searchedDownTo {
            values["searched"] = "This page examined the \(window) newest jobs that pass the other filters "
                + "(down to job \(lowest)) and found \(jobs.count) that match; Older searches further."
        }
        if before != nil { values["firstPage"] = (dead ? "/dead" : "/jobs") + Self.queryString(parsed.linkPairs(before: nil)) }
        if dead && !configuration.readOnly && !jobs.isEmpty {
            values["requeueAllLink"] = "/dead/requeue" + Self.queryString(parsed.linkPairs(before: nil))
        }
        return page("jobs", values, title: dead ? "Dead letters" : "Jobs", context: context)
    }

    private func jobPage(_ id: Int64, _ context: inout PageContext) async throws -> Response {
        guard let job = try await database.run({ try AdminStore(connection: $0).job(id) }) else {
            return page("message", ["heading": "No such job", "text": "There is no job \(id).", "back": "/jobs"],
                        title: "No such job", context: context, status: .notFound)
        }
        return page("job", JobPage.values(job, actions: !configuration.readOnly), title: "Job \(id)", context: context)
    }

    private func requeueAllPage(_ context: inout PageContext) async throws -> Response {
        let parsed = JobListQuery(context.query, dead: true)
        guard parsed.problems.isEmpty else {
            return page("message", ["heading": "Bad filter", "text": parsed.problems.joined(separator: " "), "back": "/dead"],
                        title: "Bad filter", context: context, status: .badRequest)
        }
        if configuration.readOnly {
            return page("message", ["heading": "Read-only", "text": "This console is read-only: it changes nothing."],
                        title: "Read-only", context: context, status: .forbidden)
        }
        let filter = parsed.deadFilter
        let counted = try await database.run { try AdminStore(connection: $0).countDead(filter) }
        let values: [String: Any] = [
            "count": counted.count, "one": counted.count == 1, "hasMatches": counted.count > 0,
            "maxID": String(counted.maxID), "description": parsed.description,
            "fields": parsed.formPairs.map { ["name": $0.0, "value": $0.1] },
            "back": "/dead" + Self.queryString(parsed.linkPairs(before: nil)),
        ]
        return page("requeueAll", values, title: "Requeue dead jobs", context: context)
    }

    private func destinationsPage(_ context: inout PageContext) async throws -> Response {
        let limit = 500
        let perHost = configuration.defaultPerHostLimit
        let destinations = try await database.run {
            try DestinationStore(connection: $0).list(limit: limit, defaultMaxInFlight: perHost)
        }
        let rows: [[String: Any]] = destinations.map { d in
            var row: [String: Any] = [
                "host": Redaction.text(d.host), "query": FormData.encode(d.host), "due": d.due, "later": d.later,
                "running": d.running, "cap": d.maxInFlightIsDefault ? "\(d.maxInFlight) (default)" : "\(d.maxInFlight)",
                "streak": d.failureStreak, "threshold": d.breakerThreshold, "breaker": d.breaker,
                "disabled": d.disabledAt != nil,
            ]
            if let reason = d.disabledReason { row["disabledReason"] = "(" + Redaction.message(reason) + ")" }
            return row
        }
        return page("destinations", ["destinations": rows, "hasDestinations": !rows.isEmpty],
                    title: "Destinations", context: context)
    }

    private func events() -> Response {
        let stream = feed.subscribe()
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            try await writer.write(ByteBuffer(string: ": courier live updates\n\n"))
            for await event in stream {
                try await writer.write(ByteBuffer(string: event))
            }
            try await writer.finish(nil)
        })
    }

    // MARK: Actions

    private func audit(_ context: PageContext, _ action: String, _ target: String, jobs: Int) -> WebAuditEntry {
        logger.info("console action", metadata: [
            "who": "\(context.session.name)", "client": "\(context.client)", "action": "\(action)",
            "target": "\(Redaction.message(target))", "jobs": "\(jobs)",
        ])
        return WebAuditEntry(who: context.session.name, client: context.client, action: action, target: target, jobs: jobs)
    }

    private func setPaused(_ paused: Bool, _ context: inout PageContext) async throws -> Response {
        guard let queue = context.form.nonEmpty("queue") else { return plain(.badRequest, "Which queue?") }
        let entry = audit(context, paused ? "queue.pause" : "queue.resume", queue, jobs: 0)
        let known = try await database.run { connection -> Bool in
            try connection.transaction { connection in
                let admin = AdminStore(connection: connection)
                guard try admin.queueExists(queue) else { return false }
                try admin.setPaused(queue, paused)
                try WebStore(connection: connection).audit(entry)
                return true
            }
        }
        guard known else {
            return page("message", ["heading": "No such queue", "text": "There is no queue \(Redaction.text(queue)).", "back": "/queues"],
                        title: "No such queue", context: context, status: .notFound)
        }
        sessions.setNotice(context.cookie, "Queue \(Redaction.text(queue)) \(paused ? "paused" : "resumed").")
        return redirect("/queues")
    }

    private func requeueOne(_ id: Int64, _ context: inout PageContext) async throws -> Response {
        let entry = audit(context, "job.requeue", "job \(id)", jobs: 1)
        let change = try await database.run { connection -> JobChange? in
            try connection.transaction { connection in
                let change = try AdminStore(connection: connection).requeueDead([id]).first
                if change?.changed == true { try WebStore(connection: connection).audit(entry) }
                return change
            }
        }
        let notice: String
        switch change {
        case .some(let change) where change.changed: notice = "Job \(id) requeued: it is due now."
        case .some(let change) where change.previousState != nil:
            notice = "Job \(id) is \(change.previousState!.rawValue), not dead: nothing requeued."
        default: notice = "There is no job \(id)."
        }
        sessions.setNotice(context.cookie, notice)
        return redirect(Self.localPath(context.form["back"]) ?? "/jobs/\(id)")
    }

    private func requeueAll(_ context: inout PageContext) async throws -> Response {
        let parsed = JobListQuery(context.form, dead: true)
        guard parsed.problems.isEmpty, let maxText = context.form["max_id"], let maxID = Int64(maxText) else {
            return page("message", ["heading": "Bad filter", "text": (parsed.problems + ["The form lacks its count."]).joined(separator: " "), "back": "/dead"],
                        title: "Bad filter", context: context, status: .badRequest)
        }
        let filter = parsed.deadFilter
        let description = parsed.description
        let session = context.session
        let client = context.client
        let moved = try await database.run { connection -> Int in
            let moved = try AdminStore(connection: connection).requeueDead(filter, maxID: maxID, batchSize: 1000)
            try WebStore(connection: connection).audit(
                WebAuditEntry(who: session.name, client: client, action: "dead.requeue_all", target: description, jobs: moved))
            return moved
        }
        _ = audit(context, "dead.requeue_all", description, jobs: moved)
        sessions.setNotice(context.cookie, "Requeued \(moved) dead \(moved == 1 ? "job" : "jobs"); \(moved == 1 ? "it is" : "they are") due now.")
        return redirect("/dead" + Self.queryString(parsed.linkPairs(before: nil)))
    }

    private func setDestination(enabled: Bool, _ context: inout PageContext) async throws -> Response {
        guard let text = context.form["host"], let host = DestinationHost.normalize(text) else {
            return plain(.badRequest, "Which host?")
        }
        let entry = audit(context, enabled ? "destination.enable" : "destination.disable", host, jobs: 0)
        let reason = "disabled in the web console by \(context.session.name)"
        let changed = try await database.run { connection -> Bool in
            try connection.transaction { connection in
                let store = DestinationStore(connection: connection)
                let changed: Bool
                if enabled { changed = try store.enable(host) } else { try store.disable(host, reason: reason); changed = true }
                if changed { try WebStore(connection: connection).audit(entry) }
                return changed
            }
        }
        sessions.setNotice(context.cookie, changed ? "\(host) \(enabled ? "enabled" : "disabled")." : "\(host) has no settings: nothing to enable.")
        return redirect("/destinations")
    }

    // MARK: Responses

    private func notFound(_ context: inout PageContext) -> Response {
        page("message", ["heading": "Not found", "text": "There is no such page.", "back": "/queues"],
             title: "Not found", context: context, status: .notFound)
    }

    private static let navigation: [(String, String)] = [
        ("/queues", "Queues"), ("/jobs", "Jobs"), ("/dead", "Dead letters"), ("/destinations", "Destinations"),
    ]

    /// A page inside the layout, with the session's name, CSRF token and any notice.
    private func page(
        _ template: String, _ values: [String: Any], title: String, context: PageContext,
        status: HTTPResponse.Status = .ok, live: Bool = false, problem: String? = nil
    ) -> Response {
        var values = values
        values["csrf"] = context.session.csrfToken
        values["actions"] = !configuration.readOnly
        let content = library.render(values, withTemplate: template) ?? ""
        let section = "/" + (context.path.split(separator: "/").first.map(String.init) ?? "")
        var layout: [String: Any] = [
            "title": title, "content": content, "user": context.session.name, "csrf": context.session.csrfToken,
            "nav": Self.navigation.map { ["href": $0.0, "label": $0.1, "current": $0.0 == section] },
            "readOnly": configuration.readOnly, "live": live,
        ]
        if let notice = sessions.takeNotice(context.cookie) { layout["notice"] = notice }
        if let problem { layout["problem"] = problem }
        return html(status, library.render(layout, withTemplate: "layout") ?? "")
    }

    private func html(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    private func plain(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text + "\n")))
    }

    private func asset(_ text: String, type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "max-age=300"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    private func redirect(_ location: String) -> Response {
        var headers = HTTPFields()
        headers[.location] = location
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }

    static func queryString(_ pairs: [(String, String?)]) -> String {
        let text = FormData.query(pairs)
        return text.isEmpty ? "" : "?" + text
    }

    static func clip(_ text: String, _ limit: Int) -> String {
        text.count <= limit ? text : String(text.prefix(limit - 1)) + "…"
    }
}

/// What a handler knows about its request.
struct PageContext {
    var session: WebSession
    var cookie: String
    var client: String
    var path: String
    var query: FormData
    var form = FormData(pairs: [])
}
