import Hummingbird

/// One section of the console (queues, jobs, dead letters, destinations, endpoints, messages):
/// its routes and its link in the navigation bar.
///
/// `WebApp.makeRouter` adds every area's routes behind the whole middleware chain (session,
/// form, CSRF, read-only), so a handler does only its page's work, and a new area is one more
/// type in `WebApp.areas`: its POSTs are refused in read-only mode and need the CSRF token
/// without a line of its own.
protocol ConsoleArea: Sendable {
    /// The area's link in the navigation bar; nil for an area without one.
    static var navigation: NavigationLink? { get }

    /// An area over the console's shared state.
    init(app: WebApp)

    /// The area's routes, with their paths from the root.
    func routes() -> RouteCollection<WebRequestContext>
}

/// A link of the navigation bar: the area's path and its name.
struct NavigationLink: Sendable {
    let path: String
    let label: String
}

extension ConsoleArea {
    /// The id in a route's `:id`: a positive decimal number (`JobsArea.jobID`), else the page
    /// is a 404.
    func routeID(_ context: WebRequestContext) throws -> Int64 {
        guard let id = JobsArea.jobID(context.parameters.get("id")) else { throw HTTPError(.notFound) }
        return id
    }
}

/// The paths of the pages named by stored text (a queue, a host): the text as one path
/// segment, percent-encoded, and back.
enum ConsolePath {
    /// `/queues/<name>`; nil for a name no path can carry (`.` and `..`, which browsers and
    /// HTTP clients remove from a path, encoded or not).
    static func queue(_ name: String) -> String? { segment(name).map { "/queues/" + $0 } }

    /// `/destinations/<host>`; nil as for `queue`.
    static func destination(_ host: String) -> String? { segment(host).map { "/destinations/" + $0 } }

    /// `text` as one path segment: every byte but the unreserved ones percent-encoded, so `/`,
    /// `?`, `#`, quotes and angle brackets stay inside it.
    static func segment(_ text: String) -> String? {
        guard !text.isEmpty, text != ".", text != ".." else { return nil }
        return FormData.encode(text)
    }

    /// A route's segment as the text it names; nil for a missing, empty or malformed one (the
    /// page is then a 404).
    static func decode(_ segment: String?) -> String? {
        guard let text = segment?.removingPercentEncoding, !text.isEmpty else { return nil }
        return text
    }
}
