/// How long finished jobs are kept after they finished, for queues whose row in `courier.queues`
/// sets nothing else (`keep_succeeded`, `keep_cancelled`, `keep_dead`). Attempt rows go with
/// their job. Jobs that are waiting, running or retrying are never removed, whatever their age.
public struct RetentionDefaults: Sendable, Equatable {
    /// Seconds succeeded jobs are kept (default 7 days; the worker's `--retention`).
    public var succeeded: Double
    /// Seconds cancelled jobs are kept (default 7 days).
    public var cancelled: Double
    /// Seconds dead jobs are kept (default 30 days): long enough to read and requeue them.
    public var dead: Double

    /// Creates defaults; every value is clamped to at least 0.
    public init(succeeded: Double = 7 * 86_400, cancelled: Double = 7 * 86_400, dead: Double = 30 * 86_400) {
        self.succeeded = max(0, succeeded)
        self.cancelled = max(0, cancelled)
        self.dead = max(0, dead)
    }
}

/// How much removal work one maintenance pass may do.
///
/// A pass deletes batches of `batchSize` old finished jobs, each batch its own short
/// transaction, until a batch comes back short (caught up) or `seconds` are spent. A pass that
/// stopped on its budget is behind, and the next one starts after `pauseWhenBehind` instead of
/// a whole maintenance interval, so removal keeps pace with traffic of any rate the database
/// can delete.
public struct RetentionBudget: Sendable, Equatable {
    /// Jobs one delete statement removes at most (default 5,000: about 0.1 s of work).
    public var batchSize: Int
    /// Seconds of deleting one pass may spend (default 1).
    public var seconds: Double
    /// Seconds between passes while behind (default 0.1), so claims and autovacuum get the
    /// database between bursts.
    public var pauseWhenBehind: Double

    /// Creates a budget.
    public init(batchSize: Int = 5000, seconds: Double = 1, pauseWhenBehind: Double = 0.1) {
        self.batchSize = max(1, batchSize)
        self.seconds = max(0, seconds)
        self.pauseWhenBehind = max(0, pauseWhenBehind)
    }

    /// Whether a pass deletes another batch after one that removed `deleted` jobs, `elapsed`
    /// seconds after the pass started: only when that batch was full (more may be waiting) and
    /// time is left.
    public func continues(afterDeleting deleted: Int, elapsed: Double) -> Bool {
        deleted >= batchSize && elapsed < seconds
    }

    /// Seconds until the next maintenance pass: at once (after `pauseWhenBehind`) when the last
    /// pass stopped with old jobs left, else the regular `interval`.
    public func nextPass(after report: MaintenanceReport?, interval: Double) -> Double {
        guard let report, !report.caughtUp else { return interval }
        return min(interval, pauseWhenBehind)
    }
}
