import CourierCore
import HTTPTypes
import Hummingbird
import Logging

/// Lets a request through only with a live session, which it puts in the context.
///
/// Anonymous requests never reach a route: a GET gets the login page with status 401 and the
/// address asked for as `next` (so the login comes back to it), anything else a bare 401. The
/// live stream uses `.refuse` for GETs too: an `EventSource` has no use for a page.
struct AuthenticationMiddleware: RouterMiddleware {
    typealias Context = WebRequestContext

    /// What an anonymous request gets.
    enum Anonymous: Sendable {
        /// A GET gets the login page (401), anything else a bare 401.
        case loginPage
        /// A bare 401, whatever the method.
        case refuse
    }

    let app: WebApp
    let anonymous: Anonymous

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if let cookie = CookieHeader.value(of: WebApp.cookieName, in: request.headers[.cookie]),
            let session = app.sessions.session(for: cookie)
        {
            var context = context
            context.session = RequestSession(cookie: cookie, session: session)
            return try await next(request, context)
        }
        if anonymous == .loginPage && request.method == .get {
            let next = request.uri.path + (request.uri.query.map { "?" + $0 } ?? "")
            return app.pages.loginPage(status: .unauthorized, next: WebApp.localPath(next), name: nil, problem: nil)
        }
        return PageRenderer.plain(.unauthorized, "Log in first.")
    }
}

/// Reads the form of a POST (at most `WebApp.maximumBody` bytes) into the context; a larger
/// one gets 413 and goes no further. Other requests pass untouched.
struct FormBodyMiddleware: RouterMiddleware {
    typealias Context = WebRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard request.method == .post else { return try await next(request, context) }
        var request = request
        guard let body = try? await request.collectBody(upTo: WebApp.maximumBody) else {
            return PageRenderer.plain(.contentTooLarge, "The form is too large.")
        }
        var context = context
        context.form = FormData(Substring(String(buffer: body)))
        return try await next(request, context)
    }
}

/// Turns what a page route could not answer into a page of the session: the router's 404
/// (405 for a method the console never serves) and a failure (500, with the database's
/// message redacted, and logged).
struct PageErrorMiddleware: RouterMiddleware {
    typealias Context = WebRequestContext

    let app: WebApp

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            guard request.method == .get || request.method == .post else {
                return PageRenderer.plain(.methodNotAllowed, "Only GET and POST.")
            }
            let session = try context.requireSession()
            return app.pages.message(
                "Not found", "There is no such page.", back: "/queues", request: request, session: session,
                status: .notFound)
        } catch let error as any HTTPResponseError {
            throw error
        } catch {
            let session = try context.requireSession()
            let text = Shown.failure(error)
            app.logger.error("request failed", metadata: ["http.path": "\(Shown.text(request.uri.path))", "error": "\(text)"])
            return app.pages.message(
                "Something went wrong", text, title: "Error", request: request, session: session,
                status: .internalServerError)
        }
    }
}

/// Refuses, with 403 and nothing changed, a POST whose form lacks the session's CSRF token
/// (compared in constant time).
struct CSRFMiddleware: RouterMiddleware {
    typealias Context = WebRequestContext

    let app: WebApp

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard request.method == .post else { return try await next(request, context) }
        let session = try context.requireSession()
        guard let token = context.form["csrf"], ConstantTime.equal(token, session.csrfToken) else {
            app.logger.warning("refused a form without a valid CSRF token", metadata: ["client": "\(context.client)"])
            return app.pages.message(
                "Refused", "The form's security token is missing or stale. Reload the page and try again.",
                request: request, session: session, status: .forbidden)
        }
        return try await next(request, context)
    }
}

/// In a read-only console, refuses with 403 every request it guards that would change
/// something: every POST behind it (the router adds logging out before it), and with
/// `.everyRequest` a page that only leads to a change (the requeue-all confirmation).
struct ReadOnlyMiddleware: RouterMiddleware {
    typealias Context = WebRequestContext

    /// Which requests it refuses.
    enum Scope: Sendable {
        /// POSTs.
        case posts
        /// Every request of the routes behind it.
        case everyRequest
    }

    let app: WebApp
    let scope: Scope

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard app.configuration.readOnly, scope == .everyRequest || request.method == .post else {
            return try await next(request, context)
        }
        let session = try context.requireSession()
        app.logger.notice("refused a change in read-only mode", metadata: ["http.path": "\(Shown.text(request.uri.path))"])
        return app.pages.message(
            "Read-only", "This console is read-only: it changes nothing.", request: request, session: session,
            status: .forbidden)
    }
}
