import CourierCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The console's shared state (configuration, database, sessions, live feed, templates) and the
/// router that serves it.
///
/// Only `/login` and the two static files answer without a session. Every other route, and any
/// path the router does not know, answers an anonymous GET with the login page and status 401,
/// and anything else anonymous with a bare 401. Every state-changing request is a POST that
/// carries the session's CSRF token; under `readOnly` every such POST (other than logging out)
/// is refused with 403 and no page shows an action.
final class WebApp: Sendable {
    let configuration: WebConfiguration
    let database: WebDatabase
    let sessions: SessionStore
    let throttle: LoginThrottle
    let feed: LiveFeed
    let traffic: TrafficFeed
    let logger: Logger
    let pages: PageRenderer

    static let cookieName = "courier_session"
    /// The largest form body read.
    static let maximumBody = 64 * 1024
    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!

    /// The console's areas in the order of the navigation bar; a new area goes here.
    static let areas: [any ConsoleArea.Type] = [
        QueuesArea.self, JobsArea.self, DeadLettersArea.self, DestinationsArea.self, EndpointsArea.self, MessagesArea.self,
    ]

    init(configuration: WebConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        database = WebDatabase(
            url: configuration.databaseURL, connections: configuration.databaseConnections,
            statementTimeout: configuration.statementTimeout)
        sessions = SessionStore(idleTimeout: configuration.sessionIdleTimeout, clock: configuration.clock)
        throttle = LoginThrottle(configuration.loginFailures)
        feed = LiveFeed(database: database, interval: configuration.liveInterval)
        traffic = TrafficFeed(database: database, maxAge: configuration.trafficMaxAge)
        pages = PageRenderer(
            library: try Templates.library(), readOnly: configuration.readOnly, sessions: sessions,
            navigation: Self.areas.compactMap { $0.navigation })
    }

    /// The router. Hummingbird applies a router's middleware to the routes added after it and
    /// to every path it does not know, so the order below is the security of the console:
    ///
    /// 1. `SecurityHeadersMiddleware` on every answer (404s and errors too);
    /// 2. the public routes: the static files and the login form;
    /// 3. the live stream, with its own session check (a bare 401);
    /// 4. for everything else, known or not: `AuthenticationMiddleware` (the session, or the
    ///    login page), `FormBodyMiddleware` (the form, at most 64 KiB), `PageErrorMiddleware`
    ///    (404 and failures as pages), `CSRFMiddleware` (every POST);
    /// 5. logging out;
    /// 6. `ReadOnlyMiddleware` (every POST from here on), then every area's routes.
    func makeRouter() -> Router<WebRequestContext> {
        let router = Router(context: WebRequestContext.self)
        router.add(middleware: SecurityHeadersMiddleware(logger: logger))
        let session = SessionRoutes(app: self)
        router.addRoutes(session.publicRoutes())
        router.addRoutes(QueuesArea(app: self).liveRoutes())
        router.add(middleware: AuthenticationMiddleware(app: self, anonymous: .loginPage))
        router.add(middleware: FormBodyMiddleware())
        router.add(middleware: PageErrorMiddleware(app: self))
        router.add(middleware: CSRFMiddleware(app: self))
        router.addRoutes(session.sessionRoutes())
        router.add(middleware: ReadOnlyMiddleware(app: self, scope: .posts))
        for area in Self.areas {
            router.addRoutes(area.init(app: self).routes())
        }
        return router
    }

    /// Whether the session cookie is marked `Secure`: always with `secureCookies`, else when
    /// the request came over TLS (as `X-Forwarded-Proto: https` from a proxy says).
    func secureCookies(for request: Request) -> Bool {
        configuration.secureCookies || request.headers[Self.forwardedProto]?.lowercased() == "https"
    }

    /// Logs an action of the console and returns its audit row, for the caller to write in the
    /// transaction of the change.
    func audit(_ session: RequestSession, client: String, _ action: String, _ target: String, jobs: Int) -> WebAuditEntry {
        logger.info("console action", metadata: [
            "who": "\(session.name)", "client": "\(client)", "action": "\(action)",
            "target": "\(Shown.message(target))", "jobs": "\(jobs)",
        ])
        return WebAuditEntry(who: session.name, client: client, action: action, target: target, jobs: jobs)
    }

    /// `text` when it is a path of this site (`/x`, not `//host` or `/\host`), else nil: what a
    /// redirect (`next`, `back`) may go to.
    static func localPath(_ text: String?) -> String? {
        guard let text, text.hasPrefix("/"), !text.hasPrefix("//"), !text.contains("\\"),
            !text.contains(where: { $0.isNewline || $0 == "\0" }), text.utf8.count <= 2000
        else { return nil }
        return text
    }

    /// `pairs` with values as a query string with its `?`, or nothing.
    static func queryString(_ pairs: [(String, String?)]) -> String {
        let text = FormData.query(pairs)
        return text.isEmpty ? "" : "?" + text
    }
}
