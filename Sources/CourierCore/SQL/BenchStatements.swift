import Postgres

/// Statements `courier bench` uses to watch its queues; the work itself goes through the same
/// statements as production (`AdminStatements` for bulk enqueue, `WorkerStatements` via the
/// worker).
public enum BenchStatements {
    /// A batch of finished history for `loadFinished`.
    public struct LoadFinished: Sendable {
        /// Their queue.
        public var queue: String
        /// Their request's URL.
        public var url: String
        /// Their request's body.
        public var body: [UInt8]
        /// How many jobs.
        public var count: Int
        /// The first finished this long ago.
        public var firstAgo: Duration
        /// Each next one this much later.
        public var step: Duration

        /// A batch of history.
        public init(queue: String, url: String, body: [UInt8], count: Int, firstAgo: Duration, step: Duration) {
            self.queue = queue
            self.url = url
            self.body = body
            self.count = count
            self.firstAgo = firstAgo
            self.step = step
        }
    }

    /// Succeeded jobs of queue `$1` (served by `jobs_retention_idx`).
    public static let succeededCount = Statement<String>("""
        SELECT count(*) FROM courier.jobs WHERE state = 'succeeded' AND finished_at IS NOT NULL AND queue = $1
        """, planning: .prepared) { [$0] }

    /// How many jobs of queue `$1` are unfinished (pending, running or retrying), read from the
    /// counts the triggers keep (`courier.job_counts` and the deltas not yet folded), exact in
    /// every snapshot. The benchmark asks while a drain runs (`DrainPoll`). Reading
    /// `courier.jobs` instead (`EXISTS` over the unfinished states) made the planner, whose
    /// statistics were taken before the drain, scan the table from its first page past every
    /// job already finished: 3.9 ms of a core per poll on average over a 50,000-job drain, taken
    /// from the worker under test.
    public static let unfinishedCount = Statement<String>("""
        SELECT coalesce(sum(c.jobs), 0)::bigint
        FROM (SELECT k.jobs FROM courier.job_counts k
              WHERE k.queue = $1 AND k.state IN ('pending', 'running', 'retrying')
              UNION ALL
              SELECT d.delta FROM courier.job_count_deltas d
              WHERE d.queue = $1 AND d.state IN ('pending', 'running', 'retrying')) c
        """, planning: .prepared) { [$0] }

    /// Attempts recorded for the jobs of queue `$1`.
    public static let attemptCount = Statement<String>("""
        SELECT count(*) FROM courier.attempts a JOIN courier.jobs j ON j.id = a.job_id WHERE j.queue = $1
        """) { [$0] }

    /// Per job of queue `$1`: ms from enqueue to the first attempt's start, and to the
    /// successful attempt's end.
    public static let latencies = Statement<String>("""
        SELECT extract(epoch FROM min(a.started_at) - j.created_at)::float8 * 1000,
               extract(epoch FROM max(a.finished_at) - j.created_at)::float8 * 1000
        FROM courier.jobs j JOIN courier.attempts a ON a.job_id = j.id
        WHERE j.queue = $1
        GROUP BY j.id, j.created_at
        """) { [$0] }

    /// Deletes every job of queue `$1`, so a rerun against the same database starts empty.
    public static let resetQueue = Statement<String>("DELETE FROM courier.jobs WHERE queue = $1") { [$0] }

    /// Forgets destination `$1` (its breaker and streak), so a rerun starts from a closed breaker.
    public static let resetDestination = Statement<String>("DELETE FROM courier.destinations WHERE host = $1") { [$0] }

    /// Whether destination `$1`'s breaker is open (`open`, `closed`, `unknown` without a row).
    public static let breakerState = Statement<String>("""
        SELECT coalesce((SELECT CASE WHEN opened_at IS NULL THEN 'closed' ELSE 'open' END
                         FROM courier.destinations WHERE host = $1), 'unknown')
        """) { [$0] }

    /// Wakes workers listening for queue `$1` (after `courier queues resume`).
    public static let wake = Statement<String>("SELECT pg_notify('courier_jobs', $1)") { [$0] }

    /// The server's version and durability settings, printed with the results.
    public static let serverSettings = Statement<Void>("""
        SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit'),
               current_setting('shared_buffers')
        """)

    // MARK: Scale and soak

    /// Writes `$4` succeeded jobs of queue `$1` (request to `$2`, body `$3`), each with its
    /// attempt row, in one statement: the history of the `scale` scenario. The first finished
    /// `$5` seconds ago, each next one `$6` ms later, so the finished-time indexes grow in
    /// order as they do in production. Rows pass the insert triggers (validation, counts).
    public static let loadFinished = Statement<LoadFinished>("""
        WITH j AS (
            INSERT INTO courier.jobs (queue, state, method, url, headers, body, attempt, max_attempts, run_at,
                                      created_at, updated_at, finished_at, last_status)
            SELECT $1, 'succeeded', 'POST', $2, '{"Content-Type": "application/json"}', $3::bytea, 1, 10, s.t, s.t, s.t,
                   s.t + interval '5 milliseconds', 200
            FROM generate_series(1, $4::int) AS i,
                 LATERAL (SELECT now() - $5::float8 * interval '1 second' + i * $6::float8 * interval '1 millisecond' AS t) s
            RETURNING id, run_at, finished_at
        )
        INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, response_excerpt, worker)
        SELECT j.id, 1, j.run_at, j.finished_at, 5, 200, '{"ok":true}', 'bench-history' FROM j
        """) { [$0.queue, $0.url, $0.body, $0.count, $0.firstAgo.inSeconds, $0.step.inSeconds * 1000] }

    /// Enqueues `$4` jobs of queue `$3` (request to `$1`, body `$2`) through `courier.enqueue_raw`,
    /// one call per job inside one statement: the producer of the `soak` scenario.
    public static let enqueueMany = Statement<(url: String, body: [UInt8], queue: String, count: Int)>("""
        SELECT count(courier.enqueue_raw(url => $1, body => $2::bytea, headers => '{"Content-Type": "application/json"}',
                                         queue => $3))
        FROM generate_series(1, $4::int)
        """, planning: .prepared) { [$0.url, $0.body, $0.queue, $0.count] }

    /// Sizes in bytes of the jobs and attempts tables (heap with TOAST) and of their indexes,
    /// the jobs of queue `$1` (from `courier.queue_stats`, so polling it often costs the server
    /// nothing), and how many of its succeeded jobs finished more than `$2` seconds ago (stale:
    /// older than the retention; a range of `jobs_retention_idx`).
    public static let soakSample = Statement<(queue: String, staleAfter: Duration)>("""
        SELECT pg_table_size('courier.jobs'), pg_indexes_size('courier.jobs'),
               pg_table_size('courier.attempts'), pg_indexes_size('courier.attempts'),
               (SELECT coalesce(sum(s.jobs), 0)::bigint FROM courier.queue_stats s WHERE s.queue = $1),
               (SELECT count(*) FROM courier.jobs
                WHERE queue = $1 AND state = 'succeeded' AND finished_at < now() - $2::float8 * interval '1 second')
        """) { [$0.queue, $0.staleAfter.inSeconds] }

    /// Jobs of queue `$1`, from the maintained counts: cheap enough to poll every few
    /// milliseconds while retention deletes.
    public static let queueJobs = Statement<String>("""
        SELECT coalesce(sum(jobs), 0)::bigint FROM courier.queue_stats WHERE queue = $1
        """, planning: .prepared) { [$0] }

    /// Jobs of queue `$1` that are not succeeded (none once a soak has delivered everything).
    public static let notSucceeded = Statement<String>("""
        SELECT count(*) FROM courier.jobs WHERE queue = $1 AND state <> 'succeeded'
        """) { [$0] }

    /// The health view, read whole.
    public static let queueStats = Statement<Void>("SELECT * FROM courier.queue_stats")

    /// What `courier.queue_stats` computed before migration 0006: an exact count of every row
    /// per queue and state, for comparison.
    public static let countEveryRow = Statement<Void>("""
        SELECT queue, state, count(*), min(run_at) FROM courier.jobs GROUP BY queue, state
        """)

    /// Running jobs of queue `$1`: the `inflight` scenario's sample of its peak.
    public static let running = Statement<String>("""
        SELECT count(*) FROM courier.jobs WHERE queue = $1 AND state = 'running'
        """) { [$0] }

    /// After loading a history: what autovacuum and autoanalyze would have done by the time a
    /// real history of that size exists. Two statements, each run on its own: VACUUM refuses to
    /// run in the implicit transaction of a multi-statement string.
    public static let settleHistory = [
        Statement<Void>("VACUUM ANALYZE courier.jobs"), Statement<Void>("VACUUM ANALYZE courier.attempts"),
    ]

    // MARK: Webhooks

    /// Publishes event `$1` with payload `$2` for tenant `$3` through `courier.publish`, as a
    /// producer does.
    public static let publish = Statement<(eventType: String, payload: String, tenant: String)>("""
        SELECT courier.publish(event_type => $1, payload => $2::jsonb, tenant => $3)
        """, planning: .prepared) { [$0.eventType, PostgresJSON($0.payload), $0.tenant] }

    /// Enqueues one job to `$1` with JSON payload `$2` in queue `$3` through `courier.enqueue`,
    /// the call `publish` is compared with.
    public static let enqueueJSON = Statement<(url: String, payload: String, queue: String)>("""
        SELECT courier.enqueue(url => $1, payload => $2::jsonb, queue => $3)
        """, planning: .prepared) { [$0.url, PostgresJSON($0.payload), $0.queue] }

    /// Removes tenant `$1`'s endpoints (their secrets and pacing go with them), messages and
    /// their links, so a rerun starts from none.
    public static let resetTenant = [
        Statement<String>("DELETE FROM courier.endpoints WHERE tenant = $1") { [$0] },
        Statement<String>("""
            DELETE FROM courier.deliveries l USING courier.messages m WHERE m.tenant = $1 AND l.message_id = m.id
            """) { [$0] },
        Statement<String>("DELETE FROM courier.messages WHERE tenant = $1") { [$0] },
    ]

    /// The server's data directory (needs a superuser or pg_read_all_settings), whose
    /// `postmaster.pid` lets the bench read the cluster's CPU from /proc.
    public static let dataDirectory = Statement<Void>("SELECT current_setting('data_directory')")

    /// The process id of the server process serving this connection: the benchmark's own
    /// polling, which its figure of the server's CPU leaves out.
    public static let backendPID = Statement<Void>("SELECT pg_backend_pid()")

    /// Writes out what a load dirtied (needs a superuser or pg_checkpoint).
    public static let checkpoint = Statement<Void>("CHECKPOINT")

    /// The database of the scale scenario's drains on an empty table, on the same server as the
    /// history's, so that both kinds of drain take turns on the same machine.
    public static let scaleDatabase = "courier_bench_scale_empty"

    /// Removes `scaleDatabase`, and whoever is still connected to it.
    public static let dropScaleDatabase = Statement<Void>("DROP DATABASE IF EXISTS \(scaleDatabase) WITH (FORCE)")

    /// Creates `scaleDatabase` afresh (needs CREATEDB).
    public static let createScaleDatabase = [dropScaleDatabase, Statement<Void>("CREATE DATABASE \(scaleDatabase)")]

    /// After a drain's reset and bulk enqueue: the dead rows of the reset removed and new
    /// statistics taken, as autovacuum would within a minute of such a change.
    public static let settleJobs = Statement<Void>("VACUUM ANALYZE courier.jobs")
}
