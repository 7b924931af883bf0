import Foundation
import Postgres

/// The statements of the admin CLI. Each reads or changes jobs through the indexes of
/// `0001_init.sql`, and every change is guarded by the state it expects (a cancel never touches
/// a running job, a requeue only dead ones).
public enum AdminStatements {
    /// A bulk change by filter (`dead requeue --all`, `jobs cancel --all`): the filter, the
    /// highest id it may touch (fixed when the change was counted and confirmed), and for a
    /// batch, the id after which it continues and how many rows it takes.
    public struct Bulk<Filter: Sendable>: Sendable {
        /// Which jobs.
        public var filter: Filter
        /// No job with a higher id is touched.
        public var maxID: Int64
        /// A batch takes jobs with higher ids only.
        public var after: Int64
        /// Jobs per batch.
        public var limit: Int

        /// A count (`after` and `limit` are not used) or a batch.
        public init(filter: Filter, maxID: Int64, after: Int64 = 0, limit: Int = 0) {
            self.filter = filter
            self.maxID = maxID
            self.after = after
            self.limit = limit
        }
    }

    /// Which finished jobs a purge deletes, and for a batch how many.
    public struct Purge: Sendable {
        /// A final state.
        public var state: JobState
        /// Finished before this time.
        public var olderThan: Date
        /// One queue, or nil for all.
        public var queue: String?
        /// Jobs per batch (`purgeBatch` only).
        public var limit: Int

        /// What a purge deletes.
        public init(state: JobState, olderThan: Date, queue: String?, limit: Int = 0) {
            self.state = state
            self.olderThan = olderThan
            self.queue = queue
            self.limit = limit
        }
    }

    /// `$1 ... $6` of `deadFilter`.
    private static func deadFilterArguments(_ bulk: Bulk<DeadJobFilter>) -> [any PostgresEncodable] {
        let filter = bulk.filter
        return [filter.queue, filter.failedAfter, filter.failedBefore, filter.errorContains, filter.urlContains, bulk.maxID]
    }

    /// `$1 ... $5` of `cancelFilter`.
    private static func cancelFilterArguments(_ bulk: Bulk<CancelFilter>) -> [any PostgresEncodable] {
        let filter = bulk.filter
        return [filter.state?.rawValue, filter.queue, filter.urlContains, filter.createdSince, bulk.maxID]
    }

    /// Enqueues one job through `courier.enqueue_raw`, so validation and idempotency are the
    /// SQL function's. `$6` an exact run time or NULL for now + `$10` seconds.
    public static let enqueueOne = Statement<NewJob>("""
        SELECT courier.enqueue_raw(url => $1, body => $2, method => $3, headers => $4::jsonb, queue => $5,
            run_at => coalesce($6::timestamptz, now() + coalesce($10::float8, 0) * interval '1 second'),
            max_attempts => $7, idempotency_key => $8, priority => $9,
            retry_schedule => (SELECT array_agg(s * interval '1 second' ORDER BY n)
                               FROM unnest($11::float8[]) WITH ORDINALITY AS u(s, n)))
        """, planning: .prepared) { job in
        [
            job.url, job.body, job.method, PostgresJSON(job.headersJSON), job.queue, job.runAt, job.maxAttempts,
            job.idempotencyKey, job.priority, job.delay.inSeconds, job.retrySchedule.map { PostgresArray($0.map(\.inSeconds)) },
        ]
    }

    /// The bulk loader's staging table, private to the session and dropped at commit.
    public static let createImportTable = Statement<Void>("""
        CREATE TEMP TABLE courier_import (
            line bigint NOT NULL, url text, method text, headers jsonb, queue text, body bytea,
            max_attempts integer, priority integer, run_at timestamptz, delay_s float8,
            idempotency_key text, retry_s float8[]
        ) ON COMMIT DROP
        """)

    /// Streams staged rows (`CopyText`, columns in this order).
    public static let copyImport = Statement<Void>("""
        COPY courier_import (line, url, method, headers, queue, body, max_attempts, priority, run_at, delay_s,
                             idempotency_key, retry_s) FROM STDIN
        """)

    /// Whether any staged row is invalid, checking each distinct request shape once: a bulk
    /// load usually repeats a few URLs, methods and header sets, and validation costs about
    /// 25 µs a row. The shape keeps exactly what `courier.validate_job` looks at: the body only
    /// as "over the limit or not", the idempotency key only as "absent, bad or fine", and
    /// `run_at` is checked apart: only the latest run time of each queue against that queue's
    /// scheduling window (`courier.run_at_problem`). Only when this finds a problem does
    /// `importProblems` run row by row to name the lines.
    public static let importHasProblems = Statement<Void>("""
        SELECT EXISTS (
            SELECT 1 FROM (
                SELECT DISTINCT url, method, headers, queue, max_attempts, priority, retry_s,
                    CASE WHEN octet_length(body) > 1048576 THEN octet_length(body) ELSE 0 END AS body_size,
                    CASE WHEN idempotency_key IS NULL THEN NULL
                         WHEN idempotency_key = '' OR length(idempotency_key) > 255 THEN idempotency_key
                         ELSE 'k' END AS key_shape
                FROM courier_import
            ) shape
            WHERE courier.job_problem(url, method, headers, queue, body_size, max_attempts, priority,
                (SELECT array_agg(s * interval '1 second' ORDER BY n) FROM unnest(retry_s) WITH ORDINALITY AS u(s, n)),
                key_shape, now()) IS NOT NULL
        ) OR EXISTS (
            SELECT 1 FROM (
                SELECT queue, max(coalesce(run_at, now() + coalesce(delay_s, 0) * interval '1 second')) AS latest
                FROM courier_import
                GROUP BY queue
            ) per_queue
            WHERE courier.run_at_problem(per_queue.queue, per_queue.latest) IS NOT NULL
        )
        """)

    /// Every staged line `courier.validate_job` rejects, with its message (via
    /// `courier.job_problem`, so the rules are the ones `courier.enqueue` applies).
    public static let importProblems = Statement<Void>("""
        SELECT line, problem FROM (
            SELECT i.line, courier.job_problem(i.url, i.method, i.headers, i.queue,
                coalesce(octet_length(i.body), 0), i.max_attempts, i.priority,
                (SELECT array_agg(s * interval '1 second' ORDER BY n) FROM unnest(i.retry_s) WITH ORDINALITY AS u(s, n)),
                i.idempotency_key, coalesce(i.run_at, now() + coalesce(i.delay_s, 0) * interval '1 second')) AS problem
            FROM courier_import i
        ) p
        WHERE problem IS NOT NULL
        ORDER BY line
        """)

    /// Drops staged lines `$1` (the rejected ones, under `--skip-invalid`).
    public static let dropImportLines = Statement<[Int64]>(
        "DELETE FROM courier_import WHERE line = ANY ($1::bigint[])") { [PostgresArray($0)] }

    /// Moves the staged rows without an idempotency key into `courier.jobs` in one statement
    /// (one NOTIFY per queue through the statement trigger). A plain insert: ON CONFLICT would
    /// make every row a speculative insertion, a fifth of a bulk load's insert time.
    public static let insertImportUnkeyed = Statement<Void>(insertImport(keyed: false))

    /// Moves the staged rows with an idempotency key; a key already in the queue keeps the
    /// first job.
    public static let insertImportKeyed = Statement<Void>(insertImport(keyed: true))

    private static func insertImport(keyed: Bool) -> String {
        """
        INSERT INTO courier.jobs (queue, priority, method, url, headers, body, max_attempts, retry_schedule,
                                  run_at, idempotency_key)
        SELECT i.queue, i.priority, upper(i.method), i.url, i.headers, i.body,
               coalesce(i.max_attempts, q.max_attempts, 10),
               CASE WHEN i.retry_s IS NOT NULL THEN
                   (SELECT array_agg(s * interval '1 second' ORDER BY n) FROM unnest(i.retry_s) WITH ORDINALITY AS u(s, n))
               END,
               coalesce(i.run_at, now() + coalesce(i.delay_s, 0) * interval '1 second'), i.idempotency_key
        FROM courier_import i
        LEFT JOIN courier.queues q ON q.name = i.queue
        WHERE i.idempotency_key IS \(keyed ? "NOT NULL" : "NULL")
        ORDER BY i.line
        \(keyed ? "ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING" : "")
        """
    }

    /// Newest first, filtered: `$1` state, `$2` queue, `$3` URL substring, `$4` created since,
    /// `$5` finished since, `$6` error substring, `$7` limit, `$8` finished before (NULL filters
    /// are off). Substrings are matched with `strpos`, literally: `%` and `_` are no wildcards.
    /// Walks the primary key backwards, or for a state the index that holds it:
    /// `jobs_state_queue_idx` (waiting, dead, cancelled), `jobs_host_running_idx` (running), or
    /// for succeeded jobs the primary key or `jobs_retention_idx`, whichever reads fewer rows
    /// (`finished_at IS NOT NULL` lets the planner weigh the second).
    public static let listJobs = Statement<JobFilter>("""
        SELECT id, queue, state::text, priority, method, url, attempt, max_attempts, run_at, created_at,
               finished_at, last_status, last_error
        FROM courier.jobs
        WHERE ($1::courier.job_state IS NULL OR state = $1::courier.job_state)
          AND ($1::courier.job_state IS DISTINCT FROM 'succeeded' OR finished_at IS NOT NULL)
          AND ($2::text IS NULL OR queue = $2)
          AND ($3::text IS NULL OR strpos(url, $3) > 0)
          AND ($4::timestamptz IS NULL OR created_at >= $4)
          AND ($5::timestamptz IS NULL OR finished_at >= $5)
          AND ($6::text IS NULL OR strpos(coalesce(last_error, ''), $6) > 0)
          AND ($8::timestamptz IS NULL OR finished_at < $8)
        ORDER BY id DESC
        LIMIT $7
        """) { filter in
        [
            filter.state?.rawValue, filter.queue, filter.urlContains, filter.createdSince, filter.finishedSince,
            filter.errorContains, filter.limit, filter.finishedBefore,
        ]
    }

    /// One job, whole.
    public static let showJob = Statement<Int64>("""
        SELECT id, queue, state::text, priority, method, url, headers::text, body, attempt, max_attempts,
               (SELECT array_agg(extract(epoch FROM d)::float8 ORDER BY n)
                FROM unnest(retry_schedule) WITH ORDINALITY AS u(d, n)) AS retry_s,
               run_at, created_at, updated_at, finished_at, locked_by, locked_until, idempotency_key,
               last_status, last_error
        FROM courier.jobs WHERE id = $1
        """) { [$0] }

    /// A job's attempts in order (served by `attempts_pkey`, job id first: migration 0019).
    public static let jobAttempts = Statement<Int64>("""
        SELECT attempt, started_at, finished_at, duration_ms, status, error, worker, left(response_excerpt, 300),
               in_process
        FROM courier.attempts WHERE job_id = $1 ORDER BY id
        """) { [$0] }

    /// Cancels jobs `$1` that are pending or retrying. Returns one row per asked id: whether it
    /// changed, and its state before (NULL when there is no such job).
    public static let cancelJobs = Statement<[Int64]>("""
        WITH wanted AS (SELECT DISTINCT unnest($1::bigint[]) AS id),
        changed AS (
            UPDATE courier.jobs j
            SET state = 'cancelled', finished_at = now(), updated_at = now()
            WHERE j.id IN (SELECT id FROM wanted) AND j.state IN ('pending', 'retrying')
            RETURNING j.id
        )
        SELECT w.id, c.id IS NOT NULL AS changed, j.state::text
        FROM wanted w LEFT JOIN changed c ON c.id = w.id LEFT JOIN courier.jobs j ON j.id = w.id
        ORDER BY w.id
        """) { [PostgresArray($0)] }

    /// Makes jobs `$1` that are pending or retrying due now, and wakes the workers. Same result
    /// shape as `cancelJobs`.
    public static let retryJobsNow = Statement<[Int64]>("""
        WITH wanted AS (SELECT DISTINCT unnest($1::bigint[]) AS id),
        changed AS (
            UPDATE courier.jobs j
            SET run_at = now(), updated_at = now()
            WHERE j.id IN (SELECT id FROM wanted) AND j.state IN ('pending', 'retrying')
            RETURNING j.id, j.queue
        ),
        woken AS (SELECT pg_notify('courier_jobs', q.queue) FROM (SELECT DISTINCT queue FROM changed) q)
        SELECT w.id, c.id IS NOT NULL AS changed, j.state::text, (SELECT count(*) FROM woken) AS woken
        FROM wanted w LEFT JOIN changed c ON c.id = w.id LEFT JOIN courier.jobs j ON j.id = w.id
        ORDER BY w.id
        """) { [PostgresArray($0)] }

    /// Moves dead jobs `$1` back to `pending` with fresh attempts; their attempt history stays.
    /// Same result shape as `cancelJobs`.
    public static let requeueDeadByID = Statement<[Int64]>("""
        WITH wanted AS (SELECT DISTINCT unnest($1::bigint[]) AS id),
        changed AS (
            UPDATE courier.jobs j
            SET state = 'pending', attempt = 0, run_at = now(), finished_at = NULL, updated_at = now()
            WHERE j.id IN (SELECT id FROM wanted) AND j.state = 'dead'
            RETURNING j.id, j.queue
        ),
        woken AS (SELECT pg_notify('courier_jobs', q.queue) FROM (SELECT DISTINCT queue FROM changed) q)
        SELECT w.id, c.id IS NOT NULL AS changed, j.state::text, (SELECT count(*) FROM woken) AS woken
        FROM wanted w LEFT JOIN changed c ON c.id = w.id LEFT JOIN courier.jobs j ON j.id = w.id
        ORDER BY w.id
        """) { [PostgresArray($0)] }

    /// The filter of a bulk requeue: dead, `$1` queue, `$2` died at or after, `$3` died before,
    /// `$4` error substring, `$5` URL substring (both literal, through `strpos`), ids up to `$6`
    /// (fixed when the requeue starts, so it ends, and moves no more than was counted).
    static let deadFilter = """
        state = 'dead'
          AND ($1::text IS NULL OR queue = $1)
          AND ($2::timestamptz IS NULL OR finished_at >= $2)
          AND ($3::timestamptz IS NULL OR finished_at < $3)
          AND ($4::text IS NULL OR strpos(coalesce(last_error, ''), $4) > 0)
          AND ($5::text IS NULL OR strpos(url, $5) > 0)
          AND id <= $6
        """

    /// How many dead jobs a bulk requeue would move, and the highest id among them.
    public static let countDead = Statement<Bulk<DeadJobFilter>>("""
        SELECT count(*), coalesce(max(id), 0) FROM courier.jobs WHERE \(deadFilter)
        """) { deadFilterArguments($0) }

    /// One batch of a bulk requeue: the next `$8` matching dead jobs after id `$7`, in id order,
    /// each batch its own short transaction so a million dead jobs never hold one long lock.
    /// Returns how many moved and the highest id moved.
    public static let requeueDeadBatch = Statement<Bulk<DeadJobFilter>>(batch(
        of: deadFilter, afterParameter: 7,
        set: "state = 'pending', attempt = 0, run_at = now(), finished_at = NULL, updated_at = now()", wake: true)
    ) { deadFilterArguments($0) + [$0.after, $0.limit] }

    /// The filter of a bulk cancel: waiting jobs (pending or retrying; never running ones, whose
    /// request is in flight), `$1` only this state, `$2` queue, `$3` URL substring (literal),
    /// `$4` created at or after, ids up to `$5` (fixed when the cancel starts: jobs enqueued
    /// after the count was confirmed are not touched).
    static let cancelFilter = """
        state IN ('pending', 'retrying')
          AND ($1::courier.job_state IS NULL OR state = $1::courier.job_state)
          AND ($2::text IS NULL OR queue = $2)
          AND ($3::text IS NULL OR strpos(url, $3) > 0)
          AND ($4::timestamptz IS NULL OR created_at >= $4)
          AND id <= $5
        """

    /// How many jobs a bulk cancel would cancel, and the highest id among them.
    public static let countCancellable = Statement<Bulk<CancelFilter>>("""
        SELECT count(*), coalesce(max(id), 0) FROM courier.jobs WHERE \(cancelFilter)
        """) { cancelFilterArguments($0) }

    /// One batch of a bulk cancel: the next `$7` matching jobs after id `$6`. The filter is
    /// evaluated again on the locked row, so a job a worker claimed meanwhile (now running) is
    /// left alone. Returns how many were cancelled and the highest id cancelled.
    public static let cancelBatch = Statement<Bulk<CancelFilter>>(batch(
        of: cancelFilter, afterParameter: 6, set: "state = 'cancelled', finished_at = now(), updated_at = now()",
        wake: false)
    ) { cancelFilterArguments($0) + [$0.after, $0.limit] }

    /// A batch of a bulk change: locks the next `$(after + 1)` rows matching `filter` with ids
    /// above `$after`, in id order, and applies `set` to them; FOR UPDATE makes PostgreSQL
    /// re-check the filter on rows that changed meanwhile. With `wake`, one NOTIFY per queue
    /// touched. Returns the count and the highest id changed.
    private static func batch(of filter: String, afterParameter after: Int, set: String, wake: Bool) -> String {
        // `woken` runs because the last SELECT reads it.
        let woken = """
            ,
            woken AS (SELECT pg_notify('courier_jobs', q.queue) FROM (SELECT DISTINCT queue FROM changed) q)
            """
        return """
            WITH picked AS (
                SELECT id FROM courier.jobs
                WHERE \(filter) AND id > $\(after)
                ORDER BY id
                LIMIT $\(after + 1)
                FOR UPDATE
            ),
            changed AS (
                UPDATE courier.jobs j
                SET \(set)
                FROM picked WHERE j.id = picked.id
                RETURNING j.id, j.queue
            )\(wake ? woken : "")
            SELECT count(*), coalesce(max(id), 0)\(wake ? ", (SELECT count(*) FROM woken)" : "") FROM changed
            """
    }

    /// Finished jobs a purge would delete: state `$1`, finished before `$2`, queue `$3`. Each
    /// queue of the state is a range of `jobs_retention_idx`, found by a loose index scan
    /// (`WorkerStatements.finishedGroups`).
    public static let countPurgeable = Statement<Purge>(WorkerStatements.finishedGroups + """

        SELECT coalesce(sum(c.n), 0)::bigint
        FROM finished_groups g
        CROSS JOIN LATERAL (
            SELECT count(*) AS n FROM courier.jobs j
            WHERE j.state = g.state AND j.queue = g.queue AND j.finished_at < $2
        ) c
        WHERE g.state = $1::courier.job_state AND ($3::text IS NULL OR g.queue = $3)
        """) { [$0.state.rawValue, $0.olderThan, $0.queue] }

    /// Deletes one batch of up to `$4` finished jobs (oldest first: the oldest of each queue of
    /// the state from its range of `jobs_retention_idx`, then the oldest of those); their
    /// attempts go with them (the trigger `jobs_delete_attempts`).
    public static let purgeBatch = Statement<Purge>(WorkerStatements.finishedGroups + """
        ,
        doomed AS (
            SELECT d.id
            FROM finished_groups g
            CROSS JOIN LATERAL (
                SELECT j.id, j.finished_at FROM courier.jobs j
                WHERE j.state = g.state AND j.queue = g.queue AND j.finished_at < $2
                ORDER BY j.finished_at
                LIMIT $4
            ) d
            WHERE g.state = $1::courier.job_state AND ($3::text IS NULL OR g.queue = $3)
            ORDER BY d.finished_at
            LIMIT $4
        )
        DELETE FROM courier.jobs j USING doomed WHERE j.id = doomed.id
        """) { [$0.state.rawValue, $0.olderThan, $0.queue, $0.limit] }

    /// Every known queue: those with settings and those with jobs in any state (found through
    /// the indexes, as in `knownQueues`).
    public static let listQueues = Statement<Void>("""
        SELECT n.name, coalesce(q.paused, false), q.max_attempts,
               (SELECT array_agg(extract(epoch FROM d)::float8 ORDER BY k)
                FROM unnest(q.retry_schedule) WITH ORDINALITY AS u(d, k)) AS retry_s,
               q.signing_secret IS NOT NULL, q.max_in_flight,
               q.oauth_token_url, q.oauth_client_id, q.oauth_scope, q.oauth_audience
        FROM (
        """ + queueNames + """

        ) n(name)
        LEFT JOIN courier.queues q ON q.name = n.name
        ORDER BY n.name
        """)

    /// Whether queue `$1` exists: it has a settings row or any job, in any state. The jobs'
    /// indexes lead with the state (or hold one state), so each probe names its states: waiting,
    /// dead and cancelled jobs in `jobs_state_queue_idx`, succeeded ones in `jobs_retention_idx`
    /// (one descent per state), running ones, few, in `jobs_host_running_idx`. `queue = $1`
    /// alone would scan the table, and an unknown name is the usual case here.
    public static let queueExists = Statement<String>("""
        SELECT EXISTS (SELECT 1 FROM courier.queues WHERE name = $1)
            OR EXISTS (SELECT 1 FROM courier.jobs WHERE \(listedStates) AND queue = $1)
            OR EXISTS (SELECT 1 FROM courier.jobs WHERE state = 'succeeded' AND finished_at IS NOT NULL AND queue = $1)
            OR EXISTS (SELECT 1 FROM courier.jobs WHERE state = 'running' AND queue = $1)
        """) { [$0] }

    /// The states `jobs_state_queue_idx` holds (migration 0020): a query that names them lets
    /// PostgreSQL use it. Running jobs are in `jobs_host_running_idx`, succeeded ones in
    /// `jobs_retention_idx` (with `finished_at IS NOT NULL`).
    static let listedStates = "state IN ('pending', 'retrying', 'dead', 'cancelled')"

    /// Every queue name in use (settings rows, and jobs in any state), at most 10,000, for
    /// suggesting a close match. The distinct queues of each state are found through the
    /// indexes (`queueNames`), not by reading every job.
    public static let knownQueues = Statement<Void>(queueNames + """

        ORDER BY 1
        LIMIT 10000
        """)

    /// Every queue name in use, once each: settings rows, and the distinct queues of jobs in
    /// every state, not by reading every job: for waiting, dead and cancelled jobs a loose index
    /// scan of `jobs_state_queue_idx` (one descent per state and queue), for succeeded ones the
    /// same along `jobs_retention_idx`, and the running jobs, few, through
    /// `jobs_host_running_idx`. Shared by `listQueues` and `knownQueues`.
    static let queueNames = """
        WITH RECURSIVE listed AS (
            SELECT s.state, (SELECT min(j.queue) FROM courier.jobs j
                             WHERE j.state = s.state AND j.\(listedStates)) AS queue
            FROM unnest('{pending,retrying,dead,cancelled}'::courier.job_state[]) AS s(state)
            UNION ALL
            SELECT n.state, (SELECT min(j.queue) FROM courier.jobs j
                             WHERE j.state = n.state AND j.\(listedStates) AND j.queue > n.queue)
            FROM listed n
            WHERE n.queue IS NOT NULL
        ),
        succeeded AS (
            SELECT (SELECT min(j.queue) FROM courier.jobs j
                    WHERE j.state = 'succeeded' AND j.finished_at IS NOT NULL) AS queue
            UNION ALL
            SELECT (SELECT min(j.queue) FROM courier.jobs j
                    WHERE j.state = 'succeeded' AND j.finished_at IS NOT NULL AND j.queue > s.queue)
            FROM succeeded s
            WHERE s.queue IS NOT NULL
        )
        SELECT queue FROM listed WHERE queue IS NOT NULL
        UNION
        SELECT queue FROM succeeded WHERE queue IS NOT NULL
        UNION
        SELECT j.queue FROM courier.jobs j WHERE j.state = 'running'
        UNION
        SELECT name FROM courier.queues
        """

    /// Pauses (`$2` true) or resumes queue `$1`, creating its settings row if needed.
    public static let setPaused = Statement<(queue: String, paused: Bool)>("""
        INSERT INTO courier.queues AS q (name, paused) VALUES ($1, $2)
        ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = now()
        """) { [$0.queue, $0.paused] }

    /// Changes chosen settings of queue `$1`: each `$even` flag says whether the following value
    /// replaces the current one (a NULL value restores the default).
    public static let setQueue = Statement<(queue: String, change: QueueSettingsChange)>("""
        INSERT INTO courier.queues AS q (name, max_attempts, retry_schedule, signing_secret, max_in_flight)
        VALUES ($1, $3, (SELECT array_agg(s * interval '1 second' ORDER BY n)
                         FROM unnest($5::float8[]) WITH ORDINALITY AS u(s, n)), $7, $9)
        ON CONFLICT (name) DO UPDATE SET
            max_attempts = CASE WHEN $2 THEN excluded.max_attempts ELSE q.max_attempts END,
            retry_schedule = CASE WHEN $4 THEN excluded.retry_schedule ELSE q.retry_schedule END,
            signing_secret = CASE WHEN $6 THEN excluded.signing_secret ELSE q.signing_secret END,
            max_in_flight = CASE WHEN $8 THEN excluded.max_in_flight ELSE q.max_in_flight END,
            updated_at = now()
        """) { queue, change in
        [
            queue, change.maxAttempts != nil, change.maxAttempts ?? nil, change.retrySchedule != nil,
            (change.retrySchedule ?? nil).map { PostgresArray($0.map(\.inSeconds)) }, change.signingSecret != nil,
            change.signingSecret ?? nil, change.maxInFlight != nil, change.maxInFlight ?? nil,
        ]
    }

    /// Sets a queue's OAuth2 client credentials, or removes them (nil), creating its settings
    /// row if needed.
    public static let setQueueOAuth = Statement<(queue: String, credentials: OAuth2ClientCredentials?)>("""
        INSERT INTO courier.queues AS q (name, oauth_token_url, oauth_client_id, oauth_client_secret, oauth_scope,
                                         oauth_audience)
        VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (name) DO UPDATE SET
            oauth_token_url = excluded.oauth_token_url, oauth_client_id = excluded.oauth_client_id,
            oauth_client_secret = excluded.oauth_client_secret, oauth_scope = excluded.oauth_scope,
            oauth_audience = excluded.oauth_audience, updated_at = now()
        """) { queue, credentials in
        [queue, credentials?.tokenURL, credentials?.clientID, credentials?.clientSecret, credentials?.scope,
         credentials?.audience]
    }

    /// Unfinished and dead jobs per queue and state (exact: waiting and dead ones over
    /// `jobs_state_queue_idx`, running ones over `jobs_host_running_idx`), with the oldest due
    /// job's age in seconds (the lag; pending and retrying jobs only: a dead or running job is
    /// never lag).
    public static let statsActive = Statement<Void>("""
        SELECT queue, state::text, count(*),
               -- Epochs subtracted rather than timestamps: a hand-written `-infinity` run_at then
               -- shows as an infinite lag instead of failing the whole statement.
               (extract(epoch FROM now())
                - extract(epoch FROM min(run_at) FILTER (WHERE run_at <= now() AND state IN ('pending', 'retrying'))))::float8
        FROM (SELECT queue, state, run_at FROM courier.jobs WHERE state IN ('pending', 'retrying', 'dead')
              UNION ALL
              SELECT queue, state, run_at FROM courier.jobs WHERE state = 'running') j
        GROUP BY queue, state
        """)

    /// Succeeded and dead per queue in the last hour, for every queue with a job finished in
    /// it: the last hour of each state and queue is a range of `jobs_retention_idx`, found by a
    /// loose index scan (`WorkerStatements.finishedGroups`).
    public static let statsLastHour = Statement<Void>(WorkerStatements.finishedGroups + """

        SELECT g.queue, coalesce(sum(c.n) FILTER (WHERE g.state = 'succeeded'), 0)::bigint,
               coalesce(sum(c.n) FILTER (WHERE g.state = 'dead'), 0)::bigint
        FROM finished_groups g
        CROSS JOIN LATERAL (
            SELECT count(*) AS n FROM courier.jobs j
            WHERE j.state = g.state AND j.queue = g.queue AND j.finished_at >= now() - interval '1 hour'
        ) c
        GROUP BY g.queue
        HAVING sum(c.n) > 0
        """)

    /// Attempt duration percentiles (ms) per queue over the 10,000 most recent attempts of the
    /// last 15 minutes (read backwards along `attempts_finished_idx`).
    public static let statsLatency = Statement<Void>("""
        SELECT j.queue, count(*),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms),
               percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms),
               percentile_cont(0.99) WITHIN GROUP (ORDER BY a.duration_ms)
        FROM (
            SELECT job_id, duration_ms FROM courier.attempts
            WHERE finished_at >= now() - interval '15 minutes'
            ORDER BY finished_at DESC
            LIMIT 10000
        ) a
        JOIN courier.jobs j ON j.id = a.job_id
        GROUP BY j.queue
        """)

    /// The planner's estimate of all rows and of the share of each state: finished jobs can
    /// number millions, and an exact count would scan them.
    public static let statsEstimate = Statement<Void>("""
        SELECT c.reltuples::float8, s.most_common_vals::text, s.most_common_freqs::float8[]::text
        FROM pg_class c
        JOIN pg_namespace ns ON ns.oid = c.relnamespace AND ns.nspname = 'courier'
        LEFT JOIN pg_stats s ON s.schemaname = 'courier' AND s.tablename = 'jobs' AND s.attname = 'state'
        WHERE c.relname = 'jobs'
        """)

    /// The names of paused queues.
    public static let pausedQueues = Statement<Void>("SELECT name FROM courier.queues WHERE paused ORDER BY name")
}
