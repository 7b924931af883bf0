import Postgres

/// A queue's retention periods; nil means the worker's default (`courier worker
/// --retention`, `--retention-cancelled`, `--retention-dead`: 7, 7 and 30 days).
public struct QueueRetention: Sendable, Equatable {
    /// How long succeeded jobs are kept.
    public var keepSucceeded: Duration?
    /// How long cancelled jobs are kept.
    public var keepCancelled: Duration?
    /// How long dead jobs are kept.
    public var keepDead: Duration?

    /// Creates retention settings (all defaults unless given).
    public init(keepSucceeded: Duration? = nil, keepCancelled: Duration? = nil, keepDead: Duration? = nil) {
        self.keepSucceeded = keepSucceeded
        self.keepCancelled = keepCancelled
        self.keepDead = keepDead
    }
}

/// A change of retention periods: nil leaves a field alone, `.some(nil)` restores the default.
public struct QueueRetentionChange: Sendable, Equatable {
    /// New period for succeeded jobs.
    public var keepSucceeded: Duration??
    /// New period for cancelled jobs.
    public var keepCancelled: Duration??
    /// New period for dead jobs.
    public var keepDead: Duration??

    /// An empty change.
    public init() {}

    /// Whether anything would change.
    public var isEmpty: Bool { keepSucceeded == nil && keepCancelled == nil && keepDead == nil }
}

/// One state of a queue in `courier.queue_stats`.
public struct QueueStateCount: Sendable, Equatable {
    /// The state.
    public var state: String
    /// Jobs in it.
    public var jobs: Int
    /// For pending and retrying: time since the oldest of them was due (zero when none is).
    public var lag: StoredDuration?
}

extension AdminStore {
    /// Applies a retention change to queue `name`, creating its settings row if needed.
    public func updateRetention(_ name: String, _ change: QueueRetentionChange) throws {
        guard !change.isEmpty else { return }
        try connection.run(AdminStatements.setQueueRetention, (queue: name, change: change))
    }

    /// Queue `name`'s retention periods; all defaults when it has no settings row.
    public func retention(of name: String) throws -> QueueRetention {
        let result = try connection.run(AdminStatements.queueRetention, name)
        guard result.rowCount == 1 else { return QueueRetention() }
        return QueueRetention(
            keepSucceeded: try result[0].decodeSeconds(0), keepCancelled: try result[0].decodeSeconds(1),
            keepDead: try result[0].decodeSeconds(2))
    }

    /// Queue `name`'s jobs per state (states without jobs left out), in lifecycle order.
    public func stateCounts(of name: String) throws -> [QueueStateCount] {
        let order = JobState.allCases.map(\.rawValue)
        return try connection.run(AdminStatements.queueStateCounts, name).rows.map {
            QueueStateCount(state: try $0.decode(0), jobs: try $0.decode(1), lag: try $0.decodeStoredSeconds(2))
        }.sorted { (order.firstIndex(of: $0.state) ?? 99) < (order.firstIndex(of: $1.state) ?? 99) }
    }
}
