import CourierCore
import Hummingbird
import NIOCore

/// `/queues`: the queues' counts, pausing and resuming, and the live updates of `/events`.
struct QueuesArea: ConsoleArea {
    static let navigation: NavigationLink? = NavigationLink(path: "/queues", label: "Queues")

    let app: WebApp

    init(app: WebApp) { self.app = app }

    func routes() -> RouteCollection<WebRequestContext> {
        let routes = RouteCollection(context: WebRequestContext.self)
        routes.get("/") { _, _ in PageRenderer.redirect("/queues") }
        routes.get("/queues", use: queues)
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
        let view = QueuesView(queues, perMinute: app.sampler.perMinute())
        return app.pages.page("queues", view, title: "Queues", request: request, session: session, live: true)
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
        return PageRenderer.redirect("/queues")
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
