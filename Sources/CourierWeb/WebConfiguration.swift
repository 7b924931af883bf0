import CourierCore
import CourierSecrets
import Foundation

/// How `courier web` runs. The CLI fills it from flags and `COURIER_*` variables; this target
/// never reads the environment.
public struct WebConfiguration: Sendable {
    /// The address to listen on (default 127.0.0.1).
    public var host = "127.0.0.1"
    /// The port (default 8080; 0 picks a free one, for tests).
    public var port = 8080
    /// The database (libpq URI or conninfo).
    public var databaseURL: String
    /// The login secret, as read from its file. Held only to build `WebPassword`.
    public var password: WebPassword
    /// Hide every action and refuse every state-changing request (default false).
    public var readOnly = false
    /// Always mark the session cookie `Secure` (default false: only when the request came
    /// over TLS, as `X-Forwarded-Proto: https` from a proxy says).
    public var secureCookies = false
    /// Database connections open at once (default 4).
    public var databaseConnections = 4
    /// How long the database may spend on one statement of the console before it cancels it
    /// and the page says so (default 15 s): a lock held elsewhere or a slow filter never
    /// leaves a page, or a connection of the pool, waiting for longer.
    public var statementTimeout: Duration = .seconds(15)
    /// How often the shared live reader reads the queue counts while someone listens
    /// (default 2 s).
    public var liveInterval: Duration = .seconds(2)
    /// How long the last hour of attempts, read once for every queue and host, is kept before
    /// a page reads it again (default 10 s).
    public var trafficMaxAge: Duration = .seconds(10)
    /// How long a session lives without a request (default 12 h).
    public var sessionIdleTimeout: Duration = .hours(12)
    /// Tries without a correct password allowed per client address before its logins are
    /// refused for a while (default: 10 within 10 minutes).
    public var loginFailures = LoginFailures()
    /// Rows per page of a listing (default 50).
    public var pageSize = 50
    /// The most rows a page with a URL or error substring filter examines before it answers
    /// with what it found and a link to search further (default 20,000: about 40 ms beside 5M rows).
    public var scanWindow = 20_000
    /// The workers' default in-flight cap per host, shown for destinations without their own
    /// (default 200, the worker's default).
    public var defaultPerHostLimit = Defaults.perHostLimit
    /// The key that seals webhook endpoints' secrets (`COURIER_SECRETS_KEY_FILE`, the workers'
    /// key). Only rotating a secret needs it; without it the console offers no rotation and
    /// refuses one (default nil).
    public var secretsKey: SecretsKey?
    /// What time it is, for the sessions' idle timeout: the system's clock, or a test's.
    var clock: @Sendable () -> Date = { Date() }

    /// Creates a configuration with the defaults above.
    public init(databaseURL: String, password: WebPassword) {
        self.databaseURL = databaseURL
        self.password = password
    }
}
