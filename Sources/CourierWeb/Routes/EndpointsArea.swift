import CourierCore
import CourierSecrets
import Foundation
import Hummingbird

/// `/endpoints`: webhook endpoints, one endpoint's settings and deliveries, disabling and
/// enabling one, and rotating its secret (with the secrets key only; the new secret is shown
/// once, on the answer to the rotation).
struct EndpointsArea: ConsoleArea {
    static let navigation: NavigationLink? = NavigationLink(path: "/endpoints", label: "Endpoints")

    /// The most endpoints the list shows (each counts its last 100 deliveries).
    static let listLimit = 200
    /// The deliveries an endpoint's page shows.
    static let deliveriesShown = 20
    /// How long a rotated-out secret keeps signing beside the new one.
    static let rotationGrace: Duration = .hours(24)

    let app: WebApp

    init(app: WebApp) { self.app = app }

    func routes() -> RouteCollection<WebRequestContext> {
        let routes = RouteCollection(context: WebRequestContext.self)
        routes.get("/endpoints", use: list)
        routes.get("/endpoints/:id", use: endpoint)
        routes.post("/endpoints/:id/disable") { request, context in try await setEnabled(false, request, context) }
        routes.post("/endpoints/:id/enable") { request, context in try await setEnabled(true, request, context) }
        routes.post("/endpoints/:id/rotate", use: rotate)
        return routes
    }

    private func list(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let tenant = FormData(Substring(request.uri.query ?? "")).nonEmpty("tenant")
        let limit = Self.listLimit
        let endpoints = try await app.database.run {
            try WebhookStore(connection: $0).listEndpoints(tenant: tenant, limit: limit)
        }
        return app.pages.page(
            "endpoints", EndpointsView(endpoints, tenant: tenant, limit: limit), title: "Endpoints", request: request,
            session: session)
    }

    private func endpoint(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let id = try routeID(context)
        let shown = Self.deliveriesShown
        let found = try await app.database.run { connection -> (EndpointInfo, [WebhookDelivery])? in
            let store = WebhookStore(connection: connection)
            guard let endpoint = try store.endpoint(id) else { return nil }
            return (endpoint, try store.endpointDeliveries(id, limit: shown))
        }
        guard let (endpoint, deliveries) = found else { return notFound(id, request, session) }
        let view = EndpointView(
            endpoint, deliveries: deliveries, deliveriesShown: shown, actions: !app.configuration.readOnly,
            canSeal: app.configuration.secretsKey != nil, grace: Self.rotationGrace)
        return app.pages.page("endpoint", view, title: "Endpoint \(id)", request: request, session: session)
    }

    private func setEnabled(_ enabled: Bool, _ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let id = try routeID(context)
        let action = enabled ? "endpoint.enable" : "endpoint.disable"
        let entry = WebAuditEntry(who: session.name, client: context.client, action: action, target: "endpoint \(id)", jobs: 0)
        let reason = "disabled in the web console by \(session.name)"
        // nil: no such endpoint; false: it was already so.
        let changed = try await app.database.run { connection -> Bool? in
            try connection.transaction { connection in
                let store = WebhookStore(connection: connection)
                let changed: Bool
                do {
                    changed = enabled ? try store.enableEndpoint(id) : try store.disableEndpoint(id, reason: reason)
                } catch let error as WebhookError where error.notFound {
                    return nil
                }
                if changed { try WebStore(connection: connection).audit(entry) }
                return changed
            }
        }
        guard let changed else { return notFound(id, request, session) }
        if changed { _ = app.audit(session, client: entry.client, action, entry.target, jobs: 0) }
        let notice: Shown
        switch (enabled, changed) {
        case (true, true): notice = "Endpoint \(id) enabled: new messages reach it again."
        case (true, false): notice = "Endpoint \(id) was already enabled: nothing changed."
        case (false, true): notice = "Endpoint \(id) disabled: new messages skip it; deliveries already queued still go out."
        case (false, false): notice = "Endpoint \(id) was already disabled: its first reason stands."
        }
        app.sessions.setNotice(session.cookie, notice)
        return PageRenderer.redirect("/endpoints/\(id)")
    }

    /// Rotates the secret and answers with the new one. Refused without the secrets key, and
    /// when the key does not open the endpoint's current secret: a secret sealed under another
    /// key than the workers' would stop every signature.
    private func rotate(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let id = try routeID(context)
        guard let key = app.configuration.secretsKey else {
            return app.pages.message(
                "Cannot rotate",
                "This console was started without COURIER_SECRETS_KEY_FILE (or --secrets-key-file), so it cannot seal a new secret. Nothing changed.",
                back: "/endpoints/\(id)", request: request, session: session, status: .conflict)
        }
        let secret = SecretsKey.newWebhookSecret()
        let entry = WebAuditEntry(
            who: session.name, client: context.client, action: "endpoint.rotate_secret", target: "endpoint \(id)", jobs: 0)
        let grace = Self.rotationGrace
        let outcome = try await app.database.run { connection -> Rotation in
            let store = WebhookStore(connection: connection)
            guard let endpoint = try store.endpoint(id) else { return .notFound }
            if let current = try store.validSecrets(id).first {
                do { _ = try key.open(current.sealed, endpointID: id) } catch { return .wrongKey }
            }
            do {
                let until = try store.rotateSecret(id, grace: grace, seal: { key.seal(secret, endpointID: $0) }) {
                    try WebStore(connection: $0).audit(entry)
                }
                return .rotated(until: until, url: endpoint.url)
            } catch let error as WebhookError where error.notFound {
                return .notFound
            }
        }
        switch outcome {
        case .notFound:
            return notFound(id, request, session)
        case .wrongKey:
            return app.pages.message(
                "Cannot rotate",
                "The console's secrets key does not open endpoint \(id)'s current secret: it is not the key the secrets were sealed with (the workers' COURIER_SECRETS_KEY_FILE). Nothing changed.",
                back: "/endpoints/\(id)", request: request, session: session, status: .conflict)
        case .rotated(let until, let url):
            _ = app.audit(session, client: entry.client, entry.action, entry.target, jobs: 0)
            let view = RotatedSecretView(
                id: String(id), url: .url(url), secret: secret, retiringUntil: until.map(PageFormat.time),
                graceHours: Int(grace.components.seconds / 3600))
            return app.pages.page("rotatedSecret", view, title: "New secret for endpoint \(id)", request: request, session: session)
        }
    }

    /// What a rotation came to.
    private enum Rotation: Sendable {
        case rotated(until: Date?, url: String)
        case notFound
        case wrongKey
    }

    private func notFound(_ id: Int64, _ request: Request, _ session: RequestSession) -> Response {
        app.pages.message(
            "No such endpoint", "There is no endpoint \(id).", back: "/endpoints", request: request, session: session,
            status: .notFound)
    }
}
