import Foundation
import Postgres

/// The statements of the web console (`courier web`) that the admin CLI does not already have.
/// Listings are paged by keyset (`id < $cursor`), never by OFFSET, so the hundredth page costs
/// what the first does.
public enum WebStatements {
    /// One page of a job list: the filter, the keyset cursor, the page size and, for substring
    /// filters, how many candidates a page may examine.
    public struct JobPage: Sendable {
        /// Which jobs.
        public var filter: WebJobFilter
        /// Only ids below this; nil from the newest.
        public var before: Int64?
        /// The most rows.
        public var limit: Int
        /// The most candidates `listJobsScanning` examines.
        public var scanWindow: Int

        /// A page.
        public init(filter: WebJobFilter, before: Int64?, limit: Int, scanWindow: Int = 20_000) {
            self.filter = filter
            self.before = before
            self.limit = limit
            self.scanWindow = scanWindow
        }
    }

    /// The filters of the job lists that an index can serve (NULL: off): `$1` state, `$2`
    /// queue, `$3` host, `$6`/`$7` created at or after / before, `$8`/`$9` finished at or after /
    /// before, `$10` only ids below this.
    static let indexedFilters = """
        ($1::courier.job_state IS NULL OR state = $1::courier.job_state)
          AND ($1::courier.job_state IS DISTINCT FROM 'succeeded' OR finished_at IS NOT NULL)
          AND ($2::text IS NULL OR queue = $2::text)
          AND ($3::text IS NULL OR host = $3::text)
          AND ($6::timestamptz IS NULL OR created_at >= $6::timestamptz)
          AND ($7::timestamptz IS NULL OR created_at < $7::timestamptz)
          AND ($8::timestamptz IS NULL OR finished_at >= $8::timestamptz)
          AND ($9::timestamptz IS NULL OR finished_at < $9::timestamptz)
          AND ($10::bigint IS NULL OR id < $10::bigint)
        """

    /// `$1 ... $11` of the job lists.
    private static func jobPageArguments(_ page: JobPage) -> [any PostgresEncodable] {
        let f = page.filter
        return [f.state?.rawValue, f.queue, f.host, f.urlContains, f.errorContains, f.createdSince, f.createdBefore,
                f.finishedSince, f.finishedBefore, page.before, page.limit]
    }

    /// One page of jobs, newest first. Filters (NULL: off): `$1` state, `$2` queue, `$3` host,
    /// `$4` URL substring, `$5` error substring (both literal, through `strpos`), `$6` created at
    /// or after, `$7` created before, `$8` finished at or after, `$9` finished before, `$10` only
    /// ids below this (the last id of the previous page); `$11` the most rows. The columns are
    /// those of `AdminStatements.listJobs`. A waiting, dead or cancelled state walks
    /// `jobs_state_queue_idx` (state, queue, id) backwards, running jobs are read through
    /// `jobs_host_running_idx`, a host `jobs_lane_due_idx` while it is waiting; otherwise (and
    /// for succeeded jobs unless `jobs_retention_idx` reads fewer) the primary key backwards,
    /// stopping at the page's last row.
    public static let listJobs = Statement<JobPage>(
        """
        SELECT id, queue, state::text, priority, method, url, attempt, max_attempts, run_at, created_at,
               finished_at, last_status, last_error
        FROM courier.jobs
        WHERE \(indexedFilters)
          AND ($4::text IS NULL OR strpos(url, $4::text) > 0)
          AND ($5::text IS NULL OR strpos(coalesce(last_error, ''), $5::text) > 0)
        ORDER BY id DESC
        LIMIT $11
        """, bind: jobPageArguments)

    /// One page of jobs whose filters include a substring (`$4` URL, `$5` error): no index
    /// serves `strpos`, so a filter that matches little would read the whole history for one
    /// page. This shape reads at most `$12` candidates (the newest below `$10` that pass the
    /// indexed filters, `$1` to `$3` and `$6` to `$9` as in `listJobs`), keeps the first `$11`
    /// that contain the substrings, and says how far it looked: every row carries the lowest
    /// candidate id and the number of candidates read, and when nothing matched there is one
    /// row with those two and NULL job columns. The caller continues below the lowest
    /// candidate when the window was full, so paging still visits every match, in order.
    public static let listJobsScanning = Statement<JobPage>(
        """
        WITH candidates AS (
            SELECT id, url, last_error FROM courier.jobs
            WHERE \(indexedFilters)
            ORDER BY id DESC
            LIMIT $12
        ),
        matched AS (
            SELECT c.id FROM candidates c
            WHERE ($4::text IS NULL OR strpos(c.url, $4::text) > 0)
              AND ($5::text IS NULL OR strpos(coalesce(c.last_error, ''), $5::text) > 0)
            ORDER BY c.id DESC
            LIMIT $11
        ),
        window_ AS (SELECT min(id) AS lowest, count(*) AS examined FROM candidates)
        SELECT j.id, j.queue, j.state::text, j.priority, j.method, j.url, j.attempt, j.max_attempts, j.run_at,
               j.created_at, j.finished_at, j.last_status, j.last_error, w.lowest, w.examined
        FROM window_ w
        LEFT JOIN (matched m JOIN courier.jobs j ON j.id = m.id) ON true
        ORDER BY j.id DESC NULLS LAST
        """
    ) { page in jobPageArguments(page) + [max(page.limit, page.scanWindow)] }

    /// Every queue's counts per state and the lag of its waiting states, from the maintained
    /// counts of `courier.queue_stats` (milliseconds, however many finished jobs are kept),
    /// plus every queue that has settings (paused or not) but no job.
    public static let queueOverview = Statement<Void>(
        """
        SELECT s.queue, s.state::text, s.jobs, s.lag_seconds FROM courier.queue_stats s
        UNION ALL
        SELECT q.name, NULL, 0, NULL FROM courier.queues q
        """)

    /// The attempts of the last `$1` minutes (the current minute so far and the `$1 - 1` whole
    /// ones before it), counted per queue and minute and per host and minute, with the 50th,
    /// 95th and 99th percentiles of their durations (milliseconds) per queue, per host and over
    /// all. Columns: the kind of row (0 a queue, 1 a host, 2 all of them), the queue or host, the
    /// minute (0 the oldest; NULL on a percentile row), the attempts answered 2xx and the others
    /// (another status or no answer), the three percentiles (NULL on a minute row), and on every
    /// row the window's start (epoch seconds). The row of kind 2 is always there.
    ///
    /// The window is a range of `attempts_finished_idx`, never the history: its cost follows
    /// the hour's traffic, not the millions of rows kept, and it is right from the console's
    /// first second. The table has no queue or host, so each attempt is joined to its job by
    /// primary key, once for every queue and host together (the console keeps the answer for a
    /// few seconds, `TrafficFeed`, rather than paying the join per page). The window is
    /// materialized once and every grouping reads it.
    public static let traffic = Statement<Int>(
        """
        WITH recent AS MATERIALIZED (
            SELECT j.queue, j.host, a.status, a.duration_ms,
                   floor(extract(epoch FROM a.finished_at
                                 - (date_trunc('minute', now()) - ($1::int - 1) * interval '1 minute')) / 60)::int AS minute
            FROM courier.attempts a
            JOIN courier.jobs j ON j.id = a.job_id
            WHERE a.finished_at >= date_trunc('minute', now()) - ($1::int - 1) * interval '1 minute'
              AND a.finished_at < date_trunc('minute', now()) + interval '1 minute'
        ),
        counted AS (
            SELECT 0 AS kind, r.queue AS name, r.minute,
                   count(*) FILTER (WHERE r.status BETWEEN 200 AND 299) AS delivered,
                   count(*) FILTER (WHERE r.status IS NULL OR r.status NOT BETWEEN 200 AND 299) AS failed
            FROM recent r GROUP BY r.queue, r.minute
            UNION ALL
            SELECT 1, r.host, r.minute,
                   count(*) FILTER (WHERE r.status BETWEEN 200 AND 299),
                   count(*) FILTER (WHERE r.status IS NULL OR r.status NOT BETWEEN 200 AND 299)
            FROM recent r GROUP BY r.host, r.minute
        ),
        latency AS (
            SELECT 0 AS kind, r.queue AS name,
                   percentile_cont(ARRAY[0.5, 0.95, 0.99]::float8[]) WITHIN GROUP (ORDER BY r.duration_ms) AS p
            FROM recent r GROUP BY r.queue
            UNION ALL
            SELECT 1, r.host, percentile_cont(ARRAY[0.5, 0.95, 0.99]::float8[]) WITHIN GROUP (ORDER BY r.duration_ms)
            FROM recent r GROUP BY r.host
            UNION ALL
            SELECT 2, '', percentile_cont(ARRAY[0.5, 0.95, 0.99]::float8[]) WITHIN GROUP (ORDER BY r.duration_ms)
            FROM recent r
        )
        SELECT c.kind, c.name, c.minute, c.delivered::bigint, c.failed::bigint,
               NULL::float8, NULL::float8, NULL::float8, w.since
        FROM counted c,
             (SELECT extract(epoch FROM date_trunc('minute', now()) - ($1::int - 1) * interval '1 minute')::float8 AS since) w
        UNION ALL
        SELECT l.kind, l.name, NULL, NULL, NULL, l.p[1], l.p[2], l.p[3], w.since
        FROM latency l,
             (SELECT extract(epoch FROM date_trunc('minute', now()) - ($1::int - 1) * interval '1 minute')::float8 AS since) w
        """
    ) { [$0] }

    /// Turns JIT compilation off for the rest of the transaction, for `traffic`: from about
    /// 30,000 attempts an hour its estimated cost passes `jit_above_cost`, and compiling took
    /// longer than the whole read does without it (264 ms against 105 to 165 ms beside 5M
    /// finished jobs).
    public static let trafficWithoutJIT = Statement<Void>("SET LOCAL jit = off")

    /// Queue `$1`'s settings row, without any secret: paused, max attempts, retry schedule (in
    /// seconds, PostgreSQL's array text), whether a signing secret is set (never the secret),
    /// the in-flight cap, how long succeeded and dead jobs are kept (seconds; NULL: the
    /// worker's default), whether OAuth2 credentials are set, and how far ahead a job may be
    /// scheduled. No row when the queue has no settings. One probe of the primary key.
    public static let queueSettings = Statement<String>(
        """
        SELECT q.paused, q.max_attempts,
               (SELECT array_agg(extract(epoch FROM d)::float8 ORDER BY k)
                FROM unnest(q.retry_schedule) WITH ORDINALITY AS u(d, k))::text,
               q.signing_secret IS NOT NULL, q.max_in_flight,
               extract(epoch FROM q.keep_succeeded)::float8, extract(epoch FROM q.keep_dead)::float8,
               q.oauth_token_url IS NOT NULL, extract(epoch FROM q.max_schedule_ahead)::float8
        FROM courier.queues q WHERE q.name = $1
        """
    ) { [$0] }

    /// Records one action of the console: `$1` who (the name given at login), `$2` the peer
    /// address, `$3` the action, `$4` its target, `$5` how many jobs it changed. Texts are cut
    /// to the table's bounds (in bytes, at a character boundary).
    public static let insertAudit = Statement<WebAuditEntry>(
        """
        INSERT INTO courier.web_audit (who, client, action, target, jobs) VALUES ($1, $2, $3, $4, $5)
        """
    ) { entry in
        [clip(entry.who, 200), clip(entry.client, 200), entry.action, clip(entry.target, 2000), entry.jobs]
    }

    /// `text` cut to at most `bytes` UTF-8 bytes at a character boundary.
    static func clip(_ text: String, _ bytes: Int) -> String {
        var result = ""
        var used = 0
        for character in text {
            let size = character.utf8.count
            if used + size > bytes { break }
            result.append(character)
            used += size
        }
        return result
    }
}

extension WebStatements {
    /// The `web` scenario of `courier bench`: turns the jobs of queue `$1` into dead letters
    /// with an error and an HTTP status, so the dead-letter pages have rows to show.
    public static let benchMakeDead = Statement<String>(
        """
        UPDATE courier.jobs SET state = 'dead', last_status = 503, last_error = 'HTTP 503 from the receiver'
        WHERE queue = $1 AND state = 'succeeded' AND finished_at IS NOT NULL
        """
    ) { queue in [queue] }

    /// The `web` scenario: the newest job of queue `$1` (0 when it has none).
    public static let benchNewestJob = Statement<String>(
        "SELECT coalesce(max(id), 0)::bigint FROM courier.jobs WHERE queue = $1"
    ) { queue in [queue] }

    /// The `web` scenario: an id half-way through the table, for a deep page.
    public static let benchMiddleJob = Statement<Void>(
        "SELECT coalesce((min(id) + max(id)) / 2, 0)::bigint FROM courier.jobs")
}
