import Foundation

/// Counts deliveries in flight per destination host and per queue, across all claim loops, so
/// one slow or dead endpoint can hold at most `perHostLimit` slots.
///
/// A pure bookkeeping object: `tryAcquire` says yes or no at once, never waits.
public final class InFlightLimiter: @unchecked Sendable {
    private let lock = NSLock()
    private var byHost: [String: Int] = [:]
    private var byQueue: [String: Int] = [:]
    /// Per-host cap.
    public let perHostLimit: Int

    /// Creates a limiter.
    public init(perHostLimit: Int) {
        self.perHostLimit = perHostLimit
    }

    /// Takes a slot for `host` (and `queue`, when it has a cap) if both are below their caps.
    public func tryAcquire(host: String, queue: String, queueLimit: Int?) -> Bool {
        lock.withLock {
            if byHost[host, default: 0] >= perHostLimit { return false }
            if let queueLimit, byQueue[queue, default: 0] >= queueLimit { return false }
            byHost[host, default: 0] += 1
            byQueue[queue, default: 0] += 1
            return true
        }
    }

    /// Gives back a slot taken by `tryAcquire`.
    public func release(host: String, queue: String) {
        lock.withLock {
            byHost[host, default: 1] -= 1
            if byHost[host] == 0 { byHost[host] = nil }
            byQueue[queue, default: 1] -= 1
            if byQueue[queue] == 0 { byQueue[queue] = nil }
        }
    }

    /// Deliveries in flight to `host`.
    public func inFlight(host: String) -> Int { lock.withLock { byHost[host, default: 0] } }
}
