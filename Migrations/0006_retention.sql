-- Courier 0006: retention per state and per queue, and health numbers that do not grow with history.
--
-- Months of traffic leave hundreds of millions of finished rows. This migration
--   1. adds per-queue retention settings (keep_succeeded, keep_cancelled, keep_dead; NULL: the
--      worker's defaults of 7, 7 and 30 days) and jobs_retention_idx, which finds the old finished
--      rows of one state and queue oldest first without walking live rows or younger ones, so the
--      worker's maintenance removes them in bounded batches;
--   2. keeps the number of jobs per queue and state in courier.job_counts, maintained by
--      statement triggers (one append-only row in courier.job_count_deltas per statement, queue
--      and changed state, folded into job_counts by the worker's maintenance pass), so
--      courier.queue_stats reads a few rows instead of counting the table;
--   3. adds jobs_queue_due_idx (queue, state, run_at over pending and retrying rows only) so the
--      oldest due job of each queue is one index probe, and redefines courier.queue_stats on top
--      of both: the same columns, oldest_run_at only for waiting and running jobs, and a new
--      lag_seconds, the age of the oldest due job (never of dead or finished ones).
--
-- Cost on the hot path, why it is small: the new indexes are partial. jobs_queue_due_idx takes an
-- entry when a job is enqueued or scheduled for a retry, never on claim or completion (a running
-- or finished row is outside it). jobs_retention_idx takes an entry when a job finishes, like
-- jobs_finished_idx. The count triggers run once per statement, not per row: a claim or outcome
-- batch of 100 jobs writes two delta rows. No counter row is updated by the hot path, so workers
-- and producers never wait on each other's counters.
--
-- Every existing row is kept. The whole file runs in one transaction: the counts are taken after
-- the triggers exist and while CREATE TRIGGER's lock keeps writers out, so none is missed or
-- counted twice. Building the two indexes reads the table once (minutes for tens of millions of
-- rows; workers and producers wait meanwhile).

-- Per-queue retention ---------------------------------------------------------------------------

ALTER TABLE courier.queues
    ADD COLUMN keep_succeeded interval,
    ADD COLUMN keep_cancelled interval,
    ADD COLUMN keep_dead interval,
    ADD CONSTRAINT queues_keep_bounded CHECK (
        (keep_succeeded IS NULL OR keep_succeeded BETWEEN interval '0 seconds' AND interval '3650 days')
        AND (keep_cancelled IS NULL OR keep_cancelled BETWEEN interval '0 seconds' AND interval '3650 days')
        AND (keep_dead IS NULL OR keep_dead BETWEEN interval '0 seconds' AND interval '3650 days'));
COMMENT ON COLUMN courier.queues.keep_succeeded IS
    'How long succeeded jobs of this queue are kept after they finished. NULL: the worker default (7 days).';
COMMENT ON COLUMN courier.queues.keep_cancelled IS
    'How long cancelled jobs of this queue are kept after they were cancelled. NULL: the worker default (7 days).';
COMMENT ON COLUMN courier.queues.keep_dead IS
    'How long dead jobs of this queue are kept after they died. NULL: the worker default (30 days).';
COMMENT ON CONSTRAINT queues_keep_bounded ON courier.queues IS 'Retention periods are between 0 and 3650 days.';

CREATE INDEX jobs_retention_idx ON courier.jobs (state, queue, finished_at) WHERE finished_at IS NOT NULL;
COMMENT ON INDEX courier.jobs_retention_idx IS
    'Serves retention: the finished rows of one state and queue, oldest first; also lists the queues that have some.';

CREATE INDEX jobs_queue_due_idx ON courier.jobs (queue, state, run_at) WHERE state IN ('pending', 'retrying');
COMMENT ON INDEX courier.jobs_queue_due_idx IS
    'Serves queue_stats: the oldest waiting job of a queue in one probe.';

-- Retention deletes attempt rows as fast as the worker writes them: vacuum them as often as
-- job rows (0001 gave courier.jobs these settings), not after 20 % of the table is dead.
ALTER TABLE courier.attempts SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 1
);

-- Counts per queue and state ------------------------------------------------------------------------

CREATE TABLE courier.job_counts (
    queue text NOT NULL,
    state courier.job_state NOT NULL,
    jobs  bigint NOT NULL,
    PRIMARY KEY (queue, state)
);
COMMENT ON TABLE courier.job_counts IS
    'Jobs per queue and state as of the last fold; add courier.job_count_deltas for the exact number now.';
COMMENT ON COLUMN courier.job_counts.queue IS 'Queue name.';
COMMENT ON COLUMN courier.job_counts.state IS 'Job state.';
COMMENT ON COLUMN courier.job_counts.jobs IS 'Number of jobs as of the last fold.';

-- Append-only: each writing statement adds its own rows, so concurrent writers never touch the
-- same row. Small and churned all day, so vacuumed after a few thousand changes.
CREATE TABLE courier.job_count_deltas (
    queue text NOT NULL,
    state courier.job_state NOT NULL,
    delta bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000);
COMMENT ON TABLE courier.job_count_deltas IS
    'Changes of courier.job_counts written by the count triggers, one row per statement, queue and state; '
    'folded into job_counts by courier.fold_job_counts() (the worker''s maintenance pass calls it).';
COMMENT ON COLUMN courier.job_count_deltas.queue IS 'Queue name.';
COMMENT ON COLUMN courier.job_count_deltas.state IS 'Job state.';
COMMENT ON COLUMN courier.job_count_deltas.delta IS 'Jobs that entered (positive) or left (negative) this queue and state.';

-- The trigger functions are SECURITY DEFINER so that every role that may write jobs (producers
-- through enqueue, workers, operators) updates the counts without any right on the count tables.
CREATE FUNCTION courier.count_jobs_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO courier.job_count_deltas (queue, state, delta)
    SELECT n.queue, n.state, count(*) FROM new_jobs n GROUP BY n.queue, n.state;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION courier.count_jobs_inserted() IS 'Statement trigger: adds inserted jobs to the counts.';

CREATE FUNCTION courier.count_jobs_updated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- A heartbeat changes no state and writes nothing; a claim of 100 pending jobs writes
    -- pending -100 and running +100.
    INSERT INTO courier.job_count_deltas (queue, state, delta)
    SELECT c.queue, c.state, sum(c.delta)
    FROM (SELECT o.queue, o.state, -1 AS delta FROM old_jobs o
          UNION ALL
          SELECT n.queue, n.state, 1 FROM new_jobs n) c
    GROUP BY c.queue, c.state
    HAVING sum(c.delta) <> 0;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION courier.count_jobs_updated() IS 'Statement trigger: moves updated jobs between counts.';

CREATE FUNCTION courier.count_jobs_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO courier.job_count_deltas (queue, state, delta)
    SELECT o.queue, o.state, -count(*) FROM old_jobs o GROUP BY o.queue, o.state;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION courier.count_jobs_deleted() IS 'Statement trigger: removes deleted jobs from the counts.';

CREATE FUNCTION courier.count_jobs_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM courier.job_count_deltas;
    DELETE FROM courier.job_counts;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION courier.count_jobs_truncated() IS 'Statement trigger: an emptied jobs table has no counts.';

CREATE TRIGGER jobs_count_inserted AFTER INSERT ON courier.jobs
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION courier.count_jobs_inserted();
COMMENT ON TRIGGER jobs_count_inserted ON courier.jobs IS 'Keeps courier.job_counts exact.';
CREATE TRIGGER jobs_count_updated AFTER UPDATE ON courier.jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs FOR EACH STATEMENT
    EXECUTE FUNCTION courier.count_jobs_updated();
COMMENT ON TRIGGER jobs_count_updated ON courier.jobs IS 'Keeps courier.job_counts exact.';
CREATE TRIGGER jobs_count_deleted AFTER DELETE ON courier.jobs
    REFERENCING OLD TABLE AS old_jobs FOR EACH STATEMENT EXECUTE FUNCTION courier.count_jobs_deleted();
COMMENT ON TRIGGER jobs_count_deleted ON courier.jobs IS 'Keeps courier.job_counts exact.';
CREATE TRIGGER jobs_count_truncated AFTER TRUNCATE ON courier.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION courier.count_jobs_truncated();
COMMENT ON TRIGGER jobs_count_truncated ON courier.jobs IS 'Keeps courier.job_counts exact.';

-- The triggers exist and hold their lock: count what is there now.
INSERT INTO courier.job_counts (queue, state, jobs)
SELECT j.queue, j.state, count(*) FROM courier.jobs j GROUP BY j.queue, j.state;

CREATE FUNCTION courier.fold_job_counts() RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    folded bigint;
BEGIN
    -- Deletes only the deltas this snapshot sees; rows of transactions still open stay for the
    -- next fold, so none is lost or counted twice, and a concurrent fold waits on the rows it
    -- shares with this one and then skips them.
    WITH taken AS (
        DELETE FROM courier.job_count_deltas RETURNING queue, state, delta
    ),
    summed AS (
        SELECT t.queue, t.state, sum(t.delta)::bigint AS delta, count(*) AS n FROM taken t GROUP BY t.queue, t.state
    ),
    merged AS (
        INSERT INTO courier.job_counts AS c (queue, state, jobs)
        SELECT s.queue, s.state, s.delta FROM summed s
        ON CONFLICT (queue, state) DO UPDATE SET jobs = c.jobs + excluded.jobs
        RETURNING 1
    )
    SELECT coalesce(sum(s.n), 0) INTO folded FROM summed s;
    DELETE FROM courier.job_counts c WHERE c.jobs = 0;
    RETURN folded;
END;
$$;
COMMENT ON FUNCTION courier.fold_job_counts() IS
    'Folds courier.job_count_deltas into courier.job_counts; returns the delta rows folded. The worker''s '
    'maintenance pass calls it; safe to call at any time.';
REVOKE EXECUTE ON FUNCTION courier.fold_job_counts() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION courier.fold_job_counts() TO courier_worker, courier_operator;

-- Health ---------------------------------------------------------------------------------------

-- Same columns as before, in the same order, plus lag_seconds. Reads job_counts, the deltas not
-- yet folded, and per waiting (queue, state) one probe of jobs_queue_due_idx: its cost grows with
-- the number of queues, not with the number of jobs.
CREATE OR REPLACE VIEW courier.queue_stats AS
WITH counted AS (
    SELECT c.queue, c.state, sum(c.jobs)::bigint AS jobs
    FROM (SELECT k.queue, k.state, k.jobs FROM courier.job_counts k
          UNION ALL
          SELECT d.queue, d.state, d.delta FROM courier.job_count_deltas d) c
    GROUP BY c.queue, c.state
    HAVING sum(c.jobs) > 0
)
SELECT c.queue, c.state, c.jobs, coalesce(w.run_at, r.run_at) AS oldest_run_at,
       CASE WHEN c.state IN ('pending', 'retrying')
            THEN greatest(extract(epoch FROM now()) - extract(epoch FROM w.run_at), 0)::float8
       END AS lag_seconds
FROM counted c
-- The waiting states name their partial index's predicate, so each probe is one descent of
-- jobs_queue_due_idx (queue, state, run_at) whatever the backlog.
LEFT JOIN LATERAL (
    SELECT j.run_at FROM courier.jobs j
    WHERE c.state IN ('pending', 'retrying') AND j.state IN ('pending', 'retrying')
      AND j.queue = c.queue AND j.state = c.state
    ORDER BY j.run_at
    LIMIT 1
) w ON true
-- Running jobs are at most the fleet's concurrency.
LEFT JOIN LATERAL (
    SELECT min(j.run_at) AS run_at FROM courier.jobs j
    WHERE c.state = 'running' AND j.state = 'running' AND j.queue = c.queue
) r ON true;
COMMENT ON VIEW courier.queue_stats IS
    'Per queue and state: the number of jobs, the oldest run_at of waiting and running jobs, and the lag. '
    'Reads maintained counts, so it answers in milliseconds however many finished jobs are kept.';
COMMENT ON COLUMN courier.queue_stats.queue IS 'Queue name.';
COMMENT ON COLUMN courier.queue_stats.state IS 'Job state.';
COMMENT ON COLUMN courier.queue_stats.jobs IS 'Number of jobs in this queue and state (exact).';
COMMENT ON COLUMN courier.queue_stats.oldest_run_at IS
    'The earliest run_at among pending, retrying or running jobs; NULL for finished states.';
COMMENT ON COLUMN courier.queue_stats.lag_seconds IS
    'Pending and retrying only: seconds since the run_at of the oldest of them, 0 when none is due yet; '
    'NULL for other states (a dead job is never lag).';
