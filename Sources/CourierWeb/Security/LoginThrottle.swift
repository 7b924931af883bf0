import CourierCore
import Foundation

/// Wrong passwords per client address, so guessing the console's password from many
/// connections at once is as slow as from one.
///
/// The login answer to a wrong password already waits a second, but only its own connection
/// waits: a script with a hundred connections would try a hundred passwords a second. Here an
/// address that tried `limit` passwords within `window` without success is refused
/// (HTTP 429, the password not even checked) until the oldest try is `window` old. Each try is
/// counted when it is admitted, before its password is checked, so tries made at once are
/// bounded too; a correct password forgets the address's tries.
///
/// Behind a proxy every browser has the proxy's address, so someone guessing there locks out
/// everyone for at most `window`; that is the price of never letting the guesses through.
public struct LoginFailures: Sendable {
    /// Tries without success allowed per address within `window`.
    public let limit: Int
    /// How long a try counts against its address.
    public let window: Duration
    /// The most addresses remembered; the one whose last try is oldest goes first.
    public let capacity: Int
    private var failures: [String: [Date]] = [:]

    /// Limits of `limit` tries per `window`, for at most `capacity` addresses.
    public init(limit: Int = 10, window: Duration = .minutes(10), capacity: Int = 10_000) {
        self.limit = max(1, limit)
        self.window = window
        self.capacity = max(1, capacity)
    }

    /// Admits a try from `client` and counts it; or, when the address used up its tries, counts
    /// nothing and returns when it may try again.
    mutating func admit(_ client: String, now: Date) -> Date? {
        var times = recent(client, now: now) ?? []
        if times.count >= limit { return times[times.count - limit].addingTimeInterval(window.inSeconds) }
        times.append(now)
        if failures[client] == nil, failures.count >= capacity,
            let oldest = failures.min(by: { ($0.value.last ?? .distantPast) < ($1.value.last ?? .distantPast) })
        {
            failures[oldest.key] = nil
        }
        failures[client] = times
        return nil
    }

    /// A correct password from `client`: its failures are forgotten.
    mutating func succeeded(_ client: String) {
        failures[client] = nil
    }

    /// Addresses remembered (for tests).
    var addresses: Int { failures.count }

    /// The failures of `client` still within the window, or nil when none; drops older ones.
    private mutating func recent(_ client: String, now: Date) -> [Date]? {
        guard let times = failures[client] else { return nil }
        let kept = times.filter { now.timeIntervalSince($0) < window.inSeconds }
        failures[client] = kept.isEmpty ? nil : kept
        return kept.isEmpty ? nil : kept
    }
}

/// `LoginFailures` shared by the console's request handlers.
final class LoginThrottle: @unchecked Sendable {
    private let lock = NSLock()
    private var failures: LoginFailures

    init(_ failures: LoginFailures = LoginFailures()) {
        self.failures = failures
    }

    /// See `LoginFailures.admit`.
    func admit(_ client: String, now: Date = Date()) -> Date? {
        lock.withLock { failures.admit(client, now: now) }
    }

    /// See `LoginFailures.succeeded`.
    func succeeded(_ client: String) {
        lock.withLock { failures.succeeded(client) }
    }
}
