/// How long finished jobs are kept after they finished, for queues whose row in `courier.queues`
/// sets nothing else (`keep_succeeded`, `keep_cancelled`, `keep_dead`). Attempt rows go with
/// their job. Jobs that are waiting, running or retrying are never removed, whatever their age.
public struct RetentionDefaults: Sendable, Equatable {
    /// How long succeeded jobs are kept (default 7 days; the worker's `--retention`).
    public var succeeded: Duration
    /// How long cancelled jobs are kept (default 7 days).
    public var cancelled: Duration
    /// How long dead jobs are kept (default 30 days): long enough to read and requeue them.
    public var dead: Duration

    /// Creates defaults; a negative age keeps nothing, like zero.
    public init(
        succeeded: Duration = .hours(7 * 24), cancelled: Duration = .hours(7 * 24), dead: Duration = .hours(30 * 24)
    ) {
        self.succeeded = max(.zero, succeeded)
        self.cancelled = max(.zero, cancelled)
        self.dead = max(.zero, dead)
    }
}

/// How much removal work one maintenance pass may do.
///
/// A pass deletes batches of `batchSize` old finished jobs, each batch its own short
/// transaction, until a batch comes back short (caught up) or `time` is spent. A pass that
/// stopped on its budget is behind, and the next one starts after `pauseWhenBehind` instead of
/// a whole maintenance interval, so removal keeps pace with traffic of any rate the database
/// can delete.
public struct RetentionBudget: Sendable, Equatable {
    /// Jobs one delete statement removes at most (default 5,000: about 0.1 s of work).
    public var batchSize: Int
    /// Time of deleting one pass may spend (default 1 s).
    public var time: Duration
    /// Time between passes while behind (default 100 ms), so claims and autovacuum get the
    /// database between bursts.
    public var pauseWhenBehind: Duration

    /// Creates a budget.
    public init(batchSize: Int = 5000, time: Duration = .seconds(1), pauseWhenBehind: Duration = .milliseconds(100)) {
        self.batchSize = max(1, batchSize)
        self.time = max(.zero, time)
        self.pauseWhenBehind = max(.zero, pauseWhenBehind)
    }

    /// Whether a pass deletes another batch after one that removed `deleted` jobs, `elapsed`
    /// after the pass started: only when that batch was full (more may be waiting) and time is
    /// left.
    public func continues(afterDeleting deleted: Int, elapsed: Duration) -> Bool {
        deleted >= batchSize && elapsed < time
    }

    /// Time until the next maintenance pass: at once (after `pauseWhenBehind`) when the last
    /// pass stopped with old jobs left, else the regular `interval`.
    public func nextPass(after report: MaintenanceReport?, interval: Duration) -> Duration {
        guard let report, !report.caughtUp else { return interval }
        return min(interval, pauseWhenBehind)
    }
}
