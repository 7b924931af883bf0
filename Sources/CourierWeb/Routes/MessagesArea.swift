import CourierCore
import Hummingbird

/// `/messages`: published webhook messages, one message with its payload and deliveries, and
/// re-sending it to one endpoint or to every endpoint it went to.
struct MessagesArea: ConsoleArea {
    static let navigation: NavigationLink? = NavigationLink(path: "/messages", label: "Messages")

    let app: WebApp

    init(app: WebApp) { self.app = app }

    func routes() -> RouteCollection<WebRequestContext> {
        let routes = RouteCollection(context: WebRequestContext.self)
        routes.get("/messages", use: list)
        routes.get("/messages/:id", use: message)
        routes.post("/messages/:id/resend", use: resend)
        return routes
    }

    /// A page of messages, newest first, by keyset (`before`), filtered by tenant and event type.
    private func list(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let query = FormData(Substring(request.uri.query ?? ""))
        let tenant = query.nonEmpty("tenant")
        let eventType = query.nonEmpty("event_type")
        let beforeText = query.nonEmpty("before")
        let before = beforeText.flatMap(JobsArea.jobID)
        if beforeText != nil && before == nil {
            return app.pages.page(
                "webhookMessages", WebhookMessagesView([], tenant: tenant, eventType: eventType, before: nil, limit: 1),
                title: "Messages", request: request, session: session, status: .badRequest,
                problem: "before must be a message id (a positive number).")
        }
        let filter = WebhookStatements.MessageFilter(
            tenant: tenant, eventType: eventType, before: before, limit: app.configuration.pageSize)
        let messages = try await app.database.run { try WebhookStore(connection: $0).listMessages(filter) }
        let view = WebhookMessagesView(messages, tenant: tenant, eventType: eventType, before: before, limit: filter.limit)
        return app.pages.page("webhookMessages", view, title: "Messages", request: request, session: session)
    }

    private func message(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let id = try routeID(context)
        guard let detail = try await app.database.run({ try WebhookStore(connection: $0).message(id) }) else {
            return app.pages.message(
                "No such message", "There is no message \(id).", back: "/messages", request: request, session: session,
                status: .notFound)
        }
        return app.pages.page(
            "webhookMessage", WebhookMessageView(detail, actions: !app.configuration.readOnly), title: "Message \(id)",
            request: request, session: session)
    }

    /// Re-sends the message to the form's `endpoint`, or to every endpoint it went to when the
    /// form names none. What the store refuses (a disabled endpoint, another tenant's, nothing
    /// to re-send) comes back as the notice, and nothing is written.
    private func resend(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        let id = try routeID(context)
        let endpointText = context.form.nonEmpty("endpoint")
        let endpointID = endpointText.flatMap(JobsArea.jobID)
        if endpointText != nil && endpointID == nil { return PageRenderer.plain(.badRequest, "Which endpoint?") }
        let target = endpointID.map { "message \(id) to endpoint \($0)" } ?? "message \(id) to every endpoint"
        let who = session.name
        let client = context.client
        let outcome = try await app.database.run { connection -> Result<[ResentDelivery], WebhookError> in
            do {
                return .success(try WebhookStore(connection: connection).resend(messageID: id, endpointID: endpointID) {
                    written, connection in
                    try WebStore(connection: connection).audit(
                        WebAuditEntry(who: who, client: client, action: "message.resend", target: target, jobs: written.count))
                })
            } catch let error as WebhookError {
                return .failure(error)
            }
        }
        let notice: Shown
        switch outcome {
        case .success(let written):
            _ = app.audit(session, client: client, "message.resend", target, jobs: written.count)
            let jobs = written.map { String($0.jobID) }.joined(separator: ", ")
            notice = written.count == 1
                ? "Message \(id) re-sent to endpoint \(written[0].endpointID) as job \(written[0].jobID)."
                : "Message \(id) re-sent as \(written.count) new deliveries (jobs \(text: jobs))."
        case .failure(let error):
            notice = "Nothing re-sent: \(message: error.message)."
        }
        app.sessions.setNotice(session.cookie, notice)
        return PageRenderer.redirect("/messages/\(id)")
    }
}
