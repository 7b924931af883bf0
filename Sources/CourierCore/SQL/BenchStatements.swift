/// Statements `courier bench` uses to watch its queues; the work itself goes through the same
/// statements as production (`AdminStatements` for bulk enqueue, `WorkerStatements` via the
/// worker).
public enum BenchStatements {
    /// Succeeded jobs of queue `$1` (served by `jobs_state_queue_idx`).
    public static let succeededCount = """
        SELECT count(*) FROM courier.jobs WHERE state = 'succeeded' AND queue = $1
        """

    /// Whether queue `$1` still has unfinished jobs. Stops at the first one, so polling it
    /// often costs the server almost nothing, unlike counting tens of thousands of rows.
    public static let hasUnfinished = """
        SELECT EXISTS (SELECT 1 FROM courier.jobs WHERE state IN ('pending', 'running', 'retrying') AND queue = $1)
        """

    /// Attempts recorded for the jobs of queue `$1`.
    public static let attemptCount = """
        SELECT count(*) FROM courier.attempts a JOIN courier.jobs j ON j.id = a.job_id WHERE j.queue = $1
        """

    /// Per job of queue `$1`: ms from enqueue to the first attempt's start, and to the
    /// successful attempt's end.
    public static let latencies = """
        SELECT extract(epoch FROM min(a.started_at) - j.created_at)::float8 * 1000,
               extract(epoch FROM max(a.finished_at) - j.created_at)::float8 * 1000
        FROM courier.jobs j JOIN courier.attempts a ON a.job_id = j.id
        WHERE j.queue = $1
        GROUP BY j.id, j.created_at
        """

    /// Deletes every job of queue `$1`, so a rerun against the same database starts empty.
    public static let resetQueue = "DELETE FROM courier.jobs WHERE queue = $1"

    /// Forgets destination `$1` (its breaker and streak), so a rerun starts from a closed breaker.
    public static let resetDestination = "DELETE FROM courier.destinations WHERE host = $1"

    /// Whether destination `$1`'s breaker is open (`open`, `closed`, `unknown` without a row).
    public static let breakerState = """
        SELECT coalesce((SELECT CASE WHEN opened_at IS NULL THEN 'closed' ELSE 'open' END
                         FROM courier.destinations WHERE host = $1), 'unknown')
        """

    /// Wakes workers listening for queue `$1` (after `courier queues resume`).
    public static let wake = "SELECT pg_notify('courier_jobs', $1)"

    /// The server's version and durability settings, printed with the results.
    public static let serverSettings = """
        SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit'),
               current_setting('shared_buffers')
        """
}
