/// The admin statements of per-queue retention and of `courier queues show`.
extension AdminStatements {
    /// Applies a retention change to a queue, creating its settings row if needed.
    /// `queues_keep_bounded` refuses a period outside 0 to 3650 days.
    ///
    /// Each period is a pair: whether to change it, then its seconds (NULL restores the
    /// worker's default): `$2`/`$3` succeeded, `$4`/`$5` cancelled, `$6`/`$7` dead.
    public static let setQueueRetention = Statement<(queue: String, change: QueueRetentionChange)>("""
        INSERT INTO courier.queues AS q (name, keep_succeeded, keep_cancelled, keep_dead)
        VALUES ($1, $3::float8 * interval '1 second', $5::float8 * interval '1 second', $7::float8 * interval '1 second')
        ON CONFLICT (name) DO UPDATE SET
            keep_succeeded = CASE WHEN $2 THEN excluded.keep_succeeded ELSE q.keep_succeeded END,
            keep_cancelled = CASE WHEN $4 THEN excluded.keep_cancelled ELSE q.keep_cancelled END,
            keep_dead = CASE WHEN $6 THEN excluded.keep_dead ELSE q.keep_dead END,
            updated_at = now()
        """) { queue, change in
        [
            queue, change.keepSucceeded != nil, (change.keepSucceeded ?? nil)?.inSeconds, change.keepCancelled != nil,
            (change.keepCancelled ?? nil)?.inSeconds, change.keepDead != nil, (change.keepDead ?? nil)?.inSeconds,
        ]
    }

    /// A queue's retention periods in seconds (NULL: the worker's default); no row when the
    /// queue has no settings.
    public static let queueRetention = Statement<String>("""
        SELECT extract(epoch FROM keep_succeeded)::float8, extract(epoch FROM keep_cancelled)::float8,
               extract(epoch FROM keep_dead)::float8
        FROM courier.queues WHERE name = $1
        """) { [$0] }

    /// A queue's jobs per state and the lag of its waiting states, from `courier.queue_stats`
    /// (maintained counts: milliseconds however many finished jobs are kept).
    public static let queueStateCounts = Statement<String>("""
        SELECT state::text, jobs, lag_seconds FROM courier.queue_stats WHERE queue = $1
        """) { [$0] }
}
