import CourierCore
import Hummingbird
import NIOCore

/// `/queues`: the queues' totals, counts and last hour; one queue's page (`/queues/<name>`);
/// pausing and resuming; and the live updates of `/events`.
struct QueuesArea: ConsoleArea {
    static let navigation: NavigationLink? = NavigationLink(path: "/queues", label: "Queues")

    let app: WebApp

    init(app: WebApp) { self.app = app }

    func routes() -> RouteCollection<WebRequestContext> {
        let routes = RouteCollection(context: WebRequestContext.self)
        routes.get("/") { _, _ in PageRenderer.redirect("/queues") }
        routes.get("/queues", use: queues)
        routes.get("/queues/:name", use: queue)
        routes.post("/queues/pause") { request, context in try await setPaused(true, request, context) }
        routes.post("/queues/resume") { request, context in try await setPaused(false, request, context) }
        return routes
    }

    /// `/events`, with its own check of the session: an `EventSource` cannot show a login page,
    /// so an anonymous request gets a bare 401. The router adds these before the chain that
    /// answers anonymous GETs with the login page.
    func liveRoutes() -> RouteCollection<WebRequestContext> {
        let routes = RouteCollection(context: WebRequestContext.self)
        routes.add(middleware: AuthenticationMiddleware(app: app, anonymous: .refuse))
        routes.get("/events") { _, _ in events() }
        return routes
    }

    private func queues(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let queues = try await app.database.run { try WebStore(connection: $0).queueOverview() }
        let traffic = try await app.traffic.report()
        return app.pages.page(
            "queues", QueuesView(queues, traffic: traffic.all), title: "Queues", request: request, session: session, live: true)
    }

    /// `/queues/<name>`: the queue's counts by state, its last hour (`TrafficFeed`), and
    /// its settings; a 404 page for a queue with neither jobs nor settings.
    private func queue(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        guard let name = ConsolePath.decode(context.parameters.get("name")) else { throw HTTPError(.notFound) }
        let found = try await app.database.run { try WebStore(connection: $0).queueDetail(name) }
        guard let detail = found else {
            return app.pages.message(
                "No such queue", "There is no queue \(text: name).", back: "/queues", request: request, session: session,
                status: .notFound)
        }
        let view = QueueView(detail, traffic: try await app.traffic.report().queue(name))
        return app.pages.page("queue", view, title: "Queue \(view.name)", request: request, session: session)
    }

    private func setPaused(_ paused: Bool, _ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        guard let queue = context.form.nonEmpty("queue") else { return PageRenderer.plain(.badRequest, "Which queue?") }
        let entry = app.audit(session, client: context.client, paused ? "queue.pause" : "queue.resume", queue, jobs: 0)
        let known = try await app.database.run { connection -> Bool in
            try connection.transaction { connection in
                let admin = AdminStore(connection: connection)
                guard try admin.queueExists(queue) else { return false }
                try admin.setPaused(queue, paused)
                try WebStore(connection: connection).audit(entry)
                return true
            }
        }
        guard known else {
            return app.pages.message(
                "No such queue", "There is no queue \(text: queue).", back: "/queues", request: request,
                session: session, status: .notFound)
        }
        let done: Shown = paused ? "paused" : "resumed"
        app.sessions.setNotice(session.cookie, "Queue \(text: queue) \(done).")
        return PageRenderer.redirect(WebApp.localPath(context.form["back"]) ?? "/queues")
    }

    /// The server-sent events of the shared live reader, until the browser goes or the feed stops.
    private func events() -> Response {
        let stream = app.feed.subscribe()
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
}
