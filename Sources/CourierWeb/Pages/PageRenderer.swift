import HTTPTypes
import Hummingbird
import Mustache
import NIOCore

/// Turns views into answers: a page inside the layout (with the session's name, CSRF token,
/// navigation and notice), the login page, and the plain answers around them.
struct PageRenderer: Sendable {
    let library: MustacheLibrary
    let readOnly: Bool
    let sessions: SessionStore
    /// The navigation bar, one link per area that has one.
    let navigation: [NavigationLink]

    /// `view` rendered by `template` inside the layout, for the session of the request.
    func page<View>(
        _ template: String, _ view: View, title: String, request: Request, session: RequestSession,
        status: HTTPResponse.Status = .ok, live: Bool = false, problem: String? = nil
    ) -> Response {
        let content = library.render(
            PageContent(template: template, csrf: session.csrfToken, actions: !readOnly, view: view),
            withTemplate: "content") ?? ""
        let section = "/" + (request.uri.path.split(separator: "/").first.map(String.init) ?? "")
        let layout = LayoutView(
            title: title, content: content, user: session.name, csrf: session.csrfToken,
            nav: navigation.map { NavigationItem(href: $0.path, label: $0.label, current: $0.path == section) },
            readOnly: readOnly, live: live, notice: sessions.takeNotice(session.cookie), problem: problem)
        return Self.html(status, library.render(layout, withTemplate: "layout") ?? "")
    }

    /// A message page (not found, refused, failed) for the session of the request.
    func message(
        _ heading: String, _ text: Shown, back: String? = nil, title: String? = nil, request: Request,
        session: RequestSession, status: HTTPResponse.Status
    ) -> Response {
        page("message", MessageView(heading: heading, text: text, back: back), title: title ?? heading,
             request: request, session: session, status: status)
    }

    /// The login form, without navigation; `next` is where a successful login goes.
    func loginPage(status: HTTPResponse.Status, next: String?, name: Shown?, problem: String?) -> Response {
        let content = library.render(LoginView(next: next ?? "/queues", name: name), withTemplate: "login") ?? ""
        let layout = LayoutView(
            title: "Log in", content: content, user: nil, csrf: "", nav: [], readOnly: readOnly, live: false,
            notice: nil, problem: problem)
        return Self.html(status, library.render(layout, withTemplate: "layout") ?? "")
    }

    /// An HTML answer that no cache keeps.
    static func html(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// A one-line plain-text answer that no cache keeps.
    static func plain(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text + "\n")))
    }

    /// A static file, cached for five minutes.
    static func asset(_ text: String, type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "max-age=300"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// `303 See Other` to `location` (a path of this console).
    static func redirect(_ location: String) -> Response {
        var headers = HTTPFields()
        headers[.location] = location
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }
}
