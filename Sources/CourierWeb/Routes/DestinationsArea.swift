import CourierCore
import Hummingbird

/// `/destinations`: per host its jobs, cap and breaker; one host's page
/// (`/destinations/<host>`); disabling and enabling a host.
struct DestinationsArea: ConsoleArea {
    static let navigation: NavigationLink? = NavigationLink(path: "/destinations", label: "Destinations")

    let app: WebApp

    init(app: WebApp) { self.app = app }

    func routes() -> RouteCollection<WebRequestContext> {
        let routes = RouteCollection(context: WebRequestContext.self)
        routes.get("/destinations", use: list)
        routes.get("/destinations/:host", use: destination)
        routes.post("/destinations/disable") { request, context in try await setEnabled(false, request, context) }
        routes.post("/destinations/enable") { request, context in try await setEnabled(true, request, context) }
        return routes
    }

    private func list(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let perHost = app.configuration.defaultPerHostLimit
        let destinations = try await app.database.run {
            try DestinationStore(connection: $0).list(limit: 500, defaultMaxInFlight: perHost)
        }
        return app.pages.page(
            "destinations", DestinationsView(destinations), title: "Destinations", request: request, session: session)
    }

    /// `/destinations/<host>`: the host's waiting and running jobs, its last hour
    /// (`TrafficFeed`), and its settings and breaker; a 404 page for a host with no settings,
    /// no waiting or running job and no attempt in the last hour.
    private func destination(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        guard let host = ConsolePath.decode(context.parameters.get("host")) else { throw HTTPError(.notFound) }
        let perHost = app.configuration.defaultPerHostLimit
        let destination = try await app.database.run {
            try DestinationStore(connection: $0).list(host: host, limit: 1, defaultMaxInFlight: perHost).first
        }
        let traffic = try await app.traffic.report().host(host)
        guard destination != nil || traffic.attempts > 0 else {
            return app.pages.message(
                "No such destination", "No job, setting or attempt of the last hour has the host \(text: host).",
                back: "/destinations", request: request, session: session, status: .notFound)
        }
        let view = DestinationView(destination, host: host, traffic: traffic)
        return app.pages.page("destination", view, title: "Destination \(view.host)", request: request, session: session)
    }

    private func setEnabled(_ enabled: Bool, _ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        guard let text = context.form["host"], let host = DestinationHost.normalize(text) else {
            return PageRenderer.plain(.badRequest, "Which host?")
        }
        let entry = app.audit(
            session, client: context.client, enabled ? "destination.enable" : "destination.disable", host, jobs: 0)
        let reason = "disabled in the web console by \(session.name)"
        let changed = try await app.database.run { connection -> Bool in
            try connection.transaction { connection in
                let store = DestinationStore(connection: connection)
                let changed: Bool
                if enabled { changed = try store.enable(host) } else { try store.disable(host, reason: reason); changed = true }
                if changed { try WebStore(connection: connection).audit(entry) }
                return changed
            }
        }
        let done: Shown = enabled ? "enabled" : "disabled"
        app.sessions.setNotice(
            session.cookie, changed ? "\(text: host) \(done)." : "\(text: host) has no settings: nothing to enable.")
        return PageRenderer.redirect(WebApp.localPath(context.form["back"]) ?? "/destinations")
    }
}
