import Postgres

/// The statements of `courier destinations`: destinations (`courier.destinations`) as an operator sees
/// and changes them. The claim and outcome statements that keep their live state are in
/// `WorkerStatements`.
public enum DestinationStatements {
    /// What `list` reads.
    public struct ListParameters: Sendable {
        /// One host, or nil for every destination.
        public var host: String?
        /// The most rows.
        public var limit: Int
        /// The in-flight cap shown for hosts without their own (the workers' default).
        public var defaultMaxInFlight: Int

        /// Parameters of `list`.
        public init(host: String?, limit: Int, defaultMaxInFlight: Int) {
            self.host = host
            self.limit = limit
            self.defaultMaxInFlight = defaultMaxInFlight
        }
    }

    /// Which destination `disable` turns off, and why.
    public struct DisableParameters: Sendable {
        /// The destination.
        public var host: String
        /// Shown by `courier destinations list`.
        public var reason: String

        /// Parameters of `disable`.
        public init(host: String, reason: String) {
            self.host = host
            self.reason = reason
        }
    }

    /// Destinations with a row or with waiting jobs, busiest first: due jobs, jobs scheduled
    /// later, running jobs, settings and breaker state. Waiting jobs are counted through the
    /// indexes of waiting jobs and running ones through `jobs_host_running_idx`, in two parts:
    /// no one index holds both (migration 0020).
    public static let list = Statement<ListParameters>("""
        WITH waiting AS (
            SELECT j.host,
                   count(*) FILTER (WHERE j.state <> 'running' AND j.run_at <= now()) AS due,
                   count(*) FILTER (WHERE j.state <> 'running' AND j.run_at > now()) AS later,
                   count(*) FILTER (WHERE j.state = 'running') AS running
            FROM (SELECT host, state, run_at FROM courier.jobs
                  WHERE state IN ('pending', 'retrying') AND ($1::text IS NULL OR host = $1::text)
                  UNION ALL
                  SELECT host, state, run_at FROM courier.jobs
                  WHERE state = 'running' AND ($1::text IS NULL OR host = $1::text)) j
            GROUP BY j.host
        )
        SELECT coalesce(d.host, w.host) AS host, coalesce(w.due, 0), coalesce(w.later, 0), coalesce(w.running, 0),
               coalesce(d.max_in_flight, $3::int), d.max_in_flight IS NULL, d.rate_limit,
               coalesce(d.failure_streak, 0), coalesce(d.breaker_threshold, 10),
               extract(epoch FROM coalesce(d.breaker_cooldown, interval '30 seconds'))::float8,
               CASE WHEN d.opened_at IS NULL THEN 'closed' WHEN d.probe_at > now() THEN 'open' ELSE 'half-open' END,
               d.opened_at, d.probe_at, d.disabled_at, d.disabled_reason, d.last_success_at, d.last_failure_at,
               coalesce(d.disable_on_gone, true)
        FROM courier.destinations d
        FULL JOIN waiting w ON w.host = d.host
        WHERE $1::text IS NULL OR coalesce(d.host, w.host) = $1::text
        ORDER BY coalesce(w.due, 0) DESC, coalesce(w.running, 0) DESC, 1
        LIMIT $2
        """) { [$0.host, $0.limit, $0.defaultMaxInFlight] }

    /// Disables a destination (creating its row): no job of it is claimed until it is enabled.
    /// Running requests finish. Returns the host.
    public static let disable = Statement<DisableParameters>("""
        INSERT INTO courier.destinations AS d (host, disabled_at, disabled_reason)
        VALUES ($1, now(), $2)
        ON CONFLICT (host) DO UPDATE SET disabled_at = now(), disabled_reason = $2, updated_at = now()
        RETURNING d.host
        """) { [$0.host, $0.reason] }

    /// Enables a destination (the parameter: its host) again and closes its breaker (failure
    /// streak 0), so its parked and waiting jobs are claimed at once. Returns the host; no row
    /// when it has none.
    public static let enable = Statement<String>("""
        UPDATE courier.destinations
        SET disabled_at = NULL, disabled_reason = NULL, failure_streak = 0, opened_at = NULL, probe_at = NULL,
            updated_at = now()
        WHERE host = $1
        RETURNING host
        """) { [$0] }

    /// Changes the settings of a destination that `change` names (creating its row), leaving the
    /// others as they are. The table's constraints refuse values out of range (SQLSTATE 23514).
    ///
    /// Each setting is a pair: whether to change it, then its new value (`$2`/`$3`
    /// max_in_flight, NULL = the workers' default; `$4`/`$5` rate_limit, NULL = none; `$6`/`$7`
    /// breaker_threshold; `$8`/`$9` breaker_cooldown in seconds; `$10`/`$11` disable_on_gone).
    public static let update = Statement<(host: String, change: DestinationSettingsChange)>("""
        INSERT INTO courier.destinations AS d (host, max_in_flight, rate_limit, breaker_threshold, breaker_cooldown,
                                               disable_on_gone)
        VALUES ($1, CASE WHEN $2::boolean THEN $3::int END, CASE WHEN $4::boolean THEN $5::float8 END,
                CASE WHEN $6::boolean THEN $7::int ELSE 10 END,
                CASE WHEN $8::boolean THEN $9::float8 * interval '1 second' ELSE interval '30 seconds' END,
                CASE WHEN $10::boolean THEN $11::boolean ELSE true END)
        ON CONFLICT (host) DO UPDATE SET
            max_in_flight = CASE WHEN $2::boolean THEN $3::int ELSE d.max_in_flight END,
            rate_limit = CASE WHEN $4::boolean THEN $5::float8 ELSE d.rate_limit END,
            tokens = CASE WHEN $4::boolean THEN 0 ELSE d.tokens END,
            tokens_at = CASE WHEN $4::boolean THEN NULL ELSE d.tokens_at END,
            breaker_threshold = CASE WHEN $6::boolean THEN $7::int ELSE d.breaker_threshold END,
            breaker_cooldown = CASE WHEN $8::boolean THEN $9::float8 * interval '1 second' ELSE d.breaker_cooldown END,
            disable_on_gone = CASE WHEN $10::boolean THEN $11::boolean ELSE d.disable_on_gone END,
            updated_at = now()
        RETURNING d.host
        """) { host, change in
        [
            host, change.maxInFlight != nil, change.maxInFlight ?? nil, change.rateLimit != nil, change.rateLimit ?? nil,
            change.breakerThreshold != nil, change.breakerThreshold, change.breakerCooldown != nil,
            change.breakerCooldown?.inSeconds, change.disableOnGone != nil, change.disableOnGone,
        ]
    }

    /// Wakes listening workers (a destination enabled or given more room has jobs to claim).
    public static let wake = Statement<Void>("SELECT pg_notify('courier_jobs', '')")
}
