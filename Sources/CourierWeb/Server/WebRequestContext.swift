import Hummingbird

/// What the console knows about one request beyond the request itself: the peer, and what the
/// middleware found out on the way to the route (the session, the form).
struct WebRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The peer's address, or `unknown`: the login throttle's key and the audit's client.
    let client: String
    /// The logged-in session; set by `AuthenticationMiddleware`, nil before it and on the
    /// public routes.
    var session: RequestSession?
    /// The form of a POST, read by `FormBodyMiddleware`; empty for other requests.
    var form = FormData(pairs: [])

    init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        client = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }

    /// The session of a route behind `AuthenticationMiddleware`. Reaching a route without one
    /// means the router was put together wrongly, so the answer is a bare 401, never the page.
    func requireSession() throws -> RequestSession {
        guard let session else { throw HTTPError(.unauthorized, message: "Log in first.") }
        return session
    }
}

/// A session as a request presented it: the cookie (to set and take its notice, or end it)
/// and what the store holds.
struct RequestSession: Sendable {
    /// The cookie value the browser sent.
    let cookie: String
    /// The session it names.
    let session: WebSession

    /// The name given at login.
    var name: String { session.name }
    /// The token every form of this session carries.
    var csrfToken: String { session.csrfToken }
}
