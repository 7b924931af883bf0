/// Statements `courier demo` and `courier bench` use to set up jobs and watch them settle.
public enum DemoStatements {
    /// Enqueues one JSON job through `courier.enqueue` with its own retry schedule
    /// (`$5`, seconds as float8[]), so demo and benchmark retries take seconds, not minutes.
    public static let enqueue = """
        SELECT courier.enqueue(url => $1, payload => $2::jsonb, queue => $3, max_attempts => $4,
            retry_schedule => (SELECT array_agg(s * interval '1 second') FROM unnest($5::float8[]) s))
        """

    /// Jobs of queue `$1` not yet in a final state.
    public static let unsettledCount = """
        SELECT count(*) FROM courier.jobs WHERE queue = $1 AND state NOT IN ('succeeded', 'dead', 'cancelled')
        """

    /// One line per job of queue `$1`: what happened to it.
    public static let summary = """
        SELECT id, url, state::text, attempt, last_status, last_error,
               (SELECT count(*) FROM courier.attempts a WHERE a.job_id = j.id) AS attempt_rows
        FROM courier.jobs j WHERE queue = $1 ORDER BY id
        """
}
