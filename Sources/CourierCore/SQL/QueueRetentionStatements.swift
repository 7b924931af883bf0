/// The admin statements of per-queue retention and of `courier queues show`.
extension AdminStatements {
    /// Changes chosen retention periods of queue `$1`, creating its settings row if needed: each
    /// `$even` flag says whether the following value (seconds; NULL restores the worker's
    /// default) replaces the current one. `queues_keep_bounded` refuses a period outside 0 to
    /// 3650 days.
    public static let setQueueRetention = """
        INSERT INTO courier.queues AS q (name, keep_succeeded, keep_cancelled, keep_dead)
        VALUES ($1, $3::float8 * interval '1 second', $5::float8 * interval '1 second', $7::float8 * interval '1 second')
        ON CONFLICT (name) DO UPDATE SET
            keep_succeeded = CASE WHEN $2 THEN excluded.keep_succeeded ELSE q.keep_succeeded END,
            keep_cancelled = CASE WHEN $4 THEN excluded.keep_cancelled ELSE q.keep_cancelled END,
            keep_dead = CASE WHEN $6 THEN excluded.keep_dead ELSE q.keep_dead END,
            updated_at = now()
        """

    /// Queue `$1`'s retention periods in seconds (NULL: the worker's default); no row when the
    /// queue has no settings.
    public static let queueRetention = """
        SELECT extract(epoch FROM keep_succeeded)::float8, extract(epoch FROM keep_cancelled)::float8,
               extract(epoch FROM keep_dead)::float8
        FROM courier.queues WHERE name = $1
        """

    /// Queue `$1`'s jobs per state and the lag of its waiting states, from `courier.queue_stats`
    /// (maintained counts: milliseconds however many finished jobs are kept).
    public static let queueStateCounts = """
        SELECT state::text, jobs, lag_seconds FROM courier.queue_stats WHERE queue = $1
        """
}
