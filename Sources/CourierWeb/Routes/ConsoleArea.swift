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
