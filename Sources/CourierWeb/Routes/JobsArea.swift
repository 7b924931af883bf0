import CourierCore
import Hummingbird

/// `/jobs`: the filtered list, one job's page, and requeuing one dead job.
struct JobsArea: ConsoleArea {
    static let navigation: NavigationLink? = NavigationLink(path: "/jobs", label: "Jobs")

    let app: WebApp

    init(app: WebApp) { self.app = app }

    func routes() -> RouteCollection<WebRequestContext> {
        let routes = RouteCollection(context: WebRequestContext.self)
        routes.get("/jobs") { request, context in try await JobList(app: app).page(request, context, dead: false) }
        routes.get("/jobs/:id", use: job)
        routes.post("/jobs/:id/requeue", use: requeue)
        return routes
    }

    /// The job id of a route's `:id`: a positive decimal number, else nil (and the page is 404).
    static func jobID(_ parameter: String?) -> Int64? {
        guard let parameter, parameter.allSatisfy(\.isASCII), let id = Int64(parameter), id > 0 else { return nil }
        return id
    }

    private func id(_ context: WebRequestContext) throws -> Int64 {
        guard let id = Self.jobID(context.parameters.get("id")) else { throw HTTPError(.notFound) }
        return id
    }

    private func job(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let id = try id(context)
        guard let job = try await app.database.run({ try AdminStore(connection: $0).job(id) }) else {
            return app.pages.message(
                "No such job", "There is no job \(id).", back: "/jobs", request: request, session: session,
                status: .notFound)
        }
        return app.pages.page(
            "job", JobView(job, actions: !app.configuration.readOnly), title: "Job \(id)", request: request,
            session: session)
    }

    private func requeue(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let id = try id(context)
        let entry = app.audit(session, client: context.client, "job.requeue", "job \(id)", jobs: 1)
        let change = try await app.database.run { connection -> JobChange? in
            try connection.transaction { connection in
                let change = try AdminStore(connection: connection).requeueDead([id]).first
                if change?.changed == true { try WebStore(connection: connection).audit(entry) }
                return change
            }
        }
        let notice: Shown
        switch change {
        case .some(let change) where change.changed: notice = "Job \(id) requeued: it is due now."
        case .some(let change) where change.previousState != nil:
            notice = "Job \(id) is \(text: change.previousState!.rawValue), not dead: nothing requeued."
        default: notice = "There is no job \(id)."
        }
        app.sessions.setNotice(session.cookie, notice)
        return PageRenderer.redirect(WebApp.localPath(context.form["back"]) ?? "/jobs/\(id)")
    }
}

/// The job and dead-letter lists: one page of the filtered list, newest first, by keyset.
struct JobList: Sendable {
    let app: WebApp

    /// The page of `/jobs` (or `/dead` when `dead`) for the request's query.
    func page(_ request: Request, _ context: WebRequestContext, dead: Bool) async throws -> Response {
        let session = try context.requireSession()
        let query = JobListQuery(FormData(Substring(request.uri.query ?? "")), dead: dead)
        let title = dead ? "Dead letters" : "Jobs"
        let actions = !app.configuration.readOnly
        guard query.problems.isEmpty else {
            return app.pages.page(
                "jobs", JobsView(query, page: nil, actions: actions), title: title, request: request,
                session: session, status: .badRequest, problem: query.problems.joined(separator: " "))
        }
        let filter = query.filter
        let before = query.before
        let limit = app.configuration.pageSize
        let window = app.configuration.scanWindow
        let page = try await app.database.run {
            try WebStore(connection: $0).jobs(filter, before: before, limit: limit, scanWindow: window)
        }
        return app.pages.page(
            "jobs", JobsView(query, page: page, scanWindow: window, actions: actions), title: title,
            request: request, session: session)
    }
}
