import CourierCore
import Crypto
import Foundation

/// A logged-in browser.
struct WebSession: Sendable, Equatable {
    /// The name given at login, written to the audit table.
    var name: String
    /// The token every form of this session carries (`csrf`).
    var csrfToken: String
    /// When the session was last used.
    var lastSeen: Date
    /// A message for the next page (what the last action did).
    var notice: String?
}

/// The sessions of this process, in memory: a restart logs everyone out. A cookie value is a
/// random 256-bit token; only its SHA-256 is kept as the key, so the table itself holds no
/// usable cookie.
final class SessionStore: @unchecked Sendable {
    private let lock = NSLock()
    private var sessions: [String: WebSession] = [:]
    private let idleTimeout: Duration
    /// What time it is (the tests' clock, or the system's).
    private let clock: @Sendable () -> Date
    /// The most sessions kept; the least recently used goes first.
    private let capacity = 10_000

    /// Sessions that end after `idleTimeout` without a request, by `clock`.
    init(idleTimeout: Duration, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.idleTimeout = idleTimeout
        self.clock = clock
    }

    /// Starts a session for `name` (at `now`, or the clock's time); returns the cookie value.
    func create(name: String, now: Date? = nil) -> (cookie: String, session: WebSession) {
        let now = now ?? clock()
        let cookie = Self.randomToken()
        let session = WebSession(name: name, csrfToken: Self.randomToken(), lastSeen: now)
        lock.withLock {
            if sessions.count >= capacity, let oldest = sessions.min(by: { $0.value.lastSeen < $1.value.lastSeen }) {
                sessions[oldest.key] = nil
            }
            sessions[Self.key(cookie)] = session
        }
        return (cookie, session)
    }

    /// The live session of `cookie`, marked as used at `now` (or the clock's time); nil when
    /// unknown or idle too long (an idle session is forgotten then).
    func session(for cookie: String, now: Date? = nil) -> WebSession? {
        let now = now ?? clock()
        let key = Self.key(cookie)
        return lock.withLock {
            guard var session = sessions[key] else { return nil }
            guard now.timeIntervalSince(session.lastSeen) <= idleTimeout.inSeconds else {
                sessions[key] = nil
                return nil
            }
            session.lastSeen = now
            sessions[key] = session
            return session
        }
    }

    /// Keeps `notice` for the next page the session shows.
    func setNotice(_ cookie: String, _ notice: Shown) {
        let key = Self.key(cookie)
        lock.withLock { sessions[key]?.notice = notice.string }
    }

    /// The notice waiting for the session, taken away.
    func takeNotice(_ cookie: String) -> String? {
        let key = Self.key(cookie)
        return lock.withLock {
            defer { sessions[key]?.notice = nil }
            return sessions[key]?.notice
        }
    }

    /// Ends the session of `cookie`.
    func remove(_ cookie: String) {
        let key = Self.key(cookie)
        lock.withLock { sessions[key] = nil }
    }

    /// 32 random bytes, base64url without padding.
    static func randomToken() -> String {
        let bytes = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private static func key(_ cookie: String) -> String {
        SHA256.hash(data: Array(cookie.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
