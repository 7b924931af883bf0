import CourierCore
import Hummingbird

/// `/dead`: the dead letters, and requeuing every one that matches a filter (a count to
/// confirm, then exactly the jobs counted).
struct DeadLettersArea: ConsoleArea {
    static let navigation: NavigationLink? = NavigationLink(path: "/dead", label: "Dead letters")

    let app: WebApp

    init(app: WebApp) { self.app = app }

    func routes() -> RouteCollection<WebRequestContext> {
        let routes = RouteCollection(context: WebRequestContext.self)
        routes.get("/dead") { request, context in try await JobList(app: app).page(request, context, dead: true) }
        // The confirmation page leads only to a change, so a read-only console refuses it too.
        routes.add(middleware: ReadOnlyMiddleware(app: app, scope: .everyRequest))
        routes.get("/dead/requeue", use: confirm)
        routes.post("/dead/requeue", use: requeueAll)
        return routes
    }

    private func confirm(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let query = JobListQuery(FormData(Substring(request.uri.query ?? "")), dead: true)
        guard query.problems.isEmpty else {
            return app.pages.message(
                "Bad filter", "\(text: query.problems.joined(separator: " "))", back: "/dead", request: request,
                session: session, status: .badRequest)
        }
        let filter = query.deadFilter
        let counted = try await app.database.run { try AdminStore(connection: $0).countDead(filter) }
        return app.pages.page(
            "requeueAll", RequeueAllView(query, count: counted.count, maxID: counted.maxID),
            title: "Requeue dead jobs", request: request, session: session)
    }

    private func requeueAll(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let query = JobListQuery(context.form, dead: true)
        guard query.problems.isEmpty, let maxText = context.form["max_id"], let maxID = Int64(maxText) else {
            return app.pages.message(
                "Bad filter", "\(text: (query.problems + ["The form lacks its count."]).joined(separator: " "))",
                back: "/dead", request: request, session: session, status: .badRequest)
        }
        let filter = query.deadFilter
        let description = query.description
        let who = session.name
        let client = context.client
        let moved = try await app.database.run { connection -> Int in
            let moved = try AdminStore(connection: connection).requeueDead(filter, maxID: maxID, batchSize: 1000)
            try WebStore(connection: connection).audit(
                WebAuditEntry(who: who, client: client, action: "dead.requeue_all", target: description, jobs: moved))
            return moved
        }
        _ = app.audit(session, client: client, "dead.requeue_all", description, jobs: moved)
        let jobs: Shown = moved == 1 ? "job; it is" : "jobs; they are"
        app.sessions.setNotice(session.cookie, "Requeued \(moved) dead \(jobs) due now.")
        return PageRenderer.redirect("/dead" + WebApp.queryString(query.linkPairs(before: nil)))
    }
}
