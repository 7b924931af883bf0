import CourierCore
import Foundation
import Hummingbird

/// Logging in and out, and the two static files: what answers without a session (all but
/// logging out) and what ends one.
struct SessionRoutes: Sendable {
    let app: WebApp

    /// The routes that answer anonymously: the static files and the login form. The login POST
    /// reads its form itself (`FormBodyMiddleware`), since it comes before the console's chain.
    func publicRoutes() -> RouteCollection<WebRequestContext> {
        let routes = RouteCollection(context: WebRequestContext.self)
        routes.get("/static/style.css") { _, _ in PageRenderer.asset(StaticFiles.css, type: "text/css; charset=utf-8") }
        routes.get("/static/live.js") { _, _ in
            PageRenderer.asset(StaticFiles.liveJS, type: "text/javascript; charset=utf-8")
        }
        routes.get("/login") { request, _ in
            let query = FormData(Substring(request.uri.query ?? ""))
            return app.pages.loginPage(status: .ok, next: WebApp.localPath(query["next"]), name: nil, problem: nil)
        }
        routes.add(middleware: FormBodyMiddleware())
        routes.post("/login", use: login)
        return routes
    }

    /// Logging out: behind the session and the CSRF check, and allowed in read-only mode.
    func sessionRoutes() -> RouteCollection<WebRequestContext> {
        let routes = RouteCollection(context: WebRequestContext.self)
        routes.post("/logout", use: logout)
        return routes
    }

    private func login(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let client = context.client
        let form = context.form
        let next = WebApp.localPath(form["next"]) ?? "/queues"
        let name = Redaction.text(form.nonEmpty("name") ?? "")
        guard !name.isEmpty, name.count <= 100 else {
            return app.pages.loginPage(
                status: .badRequest, next: next, name: nil, problem: "Give your name (at most 100 characters).")
        }
        if let until = app.throttle.admit(client) {
            let seconds = max(1, Int(until.timeIntervalSinceNow.rounded(.up)))
            app.logger.warning("login refused: too many wrong passwords", metadata: ["client": "\(client)"])
            var response = app.pages.loginPage(
                status: .tooManyRequests, next: next, name: .text(name),
                problem: "Too many wrong passwords from your address: try again in \(PageFormat.age(Double(seconds))).")
            response.headers[.retryAfter] = String(seconds)
            return response
        }
        guard let password = form["password"], app.configuration.password.matches(password) else {
            app.logger.warning("failed login", metadata: ["client": "\(client)"])
            // Guessing costs a second per try and connection, and `throttle` bounds the tries
            // per address however many connections make them.
            try? await Task.sleep(for: .seconds(1))
            return app.pages.loginPage(status: .unauthorized, next: next, name: .text(name), problem: "Wrong password.")
        }
        app.throttle.succeeded(client)
        let (cookie, _) = app.sessions.create(name: name)
        app.logger.info("login", metadata: ["who": "\(name)", "client": "\(client)"])
        var response = PageRenderer.redirect(next)
        response.headers[.setCookie] = CookieHeader.setCookie(
            name: WebApp.cookieName, value: cookie, secure: app.secureCookies(for: request))
        return response
    }

    private func logout(_ request: Request, _ context: WebRequestContext) async throws -> Response {
        let session = try context.requireSession()
        app.sessions.remove(session.cookie)
        var response = PageRenderer.redirect("/login")
        response.headers[.setCookie] = CookieHeader.setCookie(
            name: WebApp.cookieName, value: "", secure: app.secureCookies(for: request))
        return response
    }
}
