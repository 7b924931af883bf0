import CourierCore

/// Sends one claimed job and says what happened. Never throws: every failure is a
/// ``Delivery`` whose verdict says what to do with it.
///
/// Production uses `HTTPDeliverer` (the RetryClient); the seam lets the claim machinery be
/// exercised on its own.
public protocol Deliverer: Sendable {
    /// Delivers `job` (one attempt, which may include short in-process retries).
    func deliver(_ job: ClaimedJob) async -> Delivery

    /// The deliverer's connections to receivers now, for the worker's metrics; nil when it
    /// keeps no pool of its own.
    var connections: ConnectionStatistics? { get }
}

extension Deliverer {
    public var connections: ConnectionStatistics? { nil }
}

/// A deliverer's connections to receivers at one moment.
public struct ConnectionStatistics: Sendable, Equatable {
    /// Connections open or being opened, idle or busy.
    public var open: Int
    /// Idle connections among them.
    public var idle: Int
    /// Requests waiting for a connection (every connection busy at the budget).
    public var waiting: Int
    /// Idle connections closed to make room under the budget, since the deliverer began.
    public var evicted: Int

    /// The figures as given.
    public init(open: Int, idle: Int, waiting: Int, evicted: Int) {
        (self.open, self.idle, self.waiting, self.evicted) = (open, idle, waiting, evicted)
    }
}
