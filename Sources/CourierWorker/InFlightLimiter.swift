import Foundation

/// Counts deliveries in flight per queue across all claim loops of one process, for queues
/// with a `max_in_flight` cap. (Destination caps are kept by the claim statement in the
/// database, across all workers; see docs/destinations.md.)
///
/// A pure bookkeeping object: `tryAcquire` says yes or no at once, never waits.
public final class InFlightLimiter: @unchecked Sendable {
    private let lock = NSLock()
    private var byQueue: [String: Int] = [:]

    /// Creates a limiter.
    public init() {}

    /// Takes a slot for `queue` if it has no cap or is below it.
    public func tryAcquire(queue: String, queueLimit: Int?) -> Bool {
        lock.withLock {
            if let queueLimit, byQueue[queue, default: 0] >= queueLimit { return false }
            byQueue[queue, default: 0] += 1
            return true
        }
    }

    /// Gives back a slot taken by `tryAcquire`.
    public func release(queue: String) {
        lock.withLock {
            byQueue[queue, default: 1] -= 1
            if byQueue[queue] == 0 { byQueue[queue] = nil }
        }
    }

    /// Deliveries in flight of `queue`.
    public func inFlight(queue: String) -> Int { lock.withLock { byQueue[queue, default: 0] } }
}
