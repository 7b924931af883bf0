-- 0021: a job's queue name, max_attempts and retry schedule are checked when they are written,
-- not at every update of the row.
--
-- PostgreSQL evaluates every CHECK constraint of a row at every UPDATE, whichever columns
-- changed, and a delivered job is updated twice (its claim and its outcome). These three
-- columns are written when the job is enqueued and never by a worker, yet their constraints
-- cost the most of the table's ten: the queue name's byte check alone about 3,900 instructions
-- per update, and each statement prepared all three again (retry_schedule_ok's SQL parsed and
-- inlined). The rules are the same and still hold for every row written, by courier.enqueue or
-- by hand:
--
--   * a statement trigger, jobs_check_settings_inserted, checks each distinct (queue,
--     max_attempts, retry_schedule) of an INSERT's rows, beside jobs_check_inserted, which
--     checks their requests;
--   * a row trigger, jobs_check_settings_updated, checks an UPDATE that sets any of them.
--
-- A refused row still fails with SQLSTATE 23514 (check_violation) and the constraint's old name,
-- and the message now says which value broke which rule.
--
-- Counted with callgrind on the server, a claim-like and an outcome-like UPDATE of 100 jobs
-- (pgbench, one host, after migration 0020): 200,600 instructions per job before, 189,100 after.
-- Dropping the constraints reads no row; every existing row met them.

CREATE FUNCTION courier.check_job_settings(queue text, max_attempts integer, retry_schedule interval[])
    RETURNS void
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    problem text := courier.settings_problem(queue, max_attempts, 0, retry_schedule, NULL);
BEGIN
    -- The rules of courier.enqueue (settings_problem), each reported under the name of the
    -- constraint that held it on the table before.
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = 'courier', TABLE = 'jobs', MESSAGE = problem,
            CONSTRAINT = CASE split_part(problem, ' ', 1)
                             WHEN 'queue' THEN 'jobs_queue_valid'
                             WHEN 'max_attempts' THEN 'jobs_max_attempts_positive'
                             ELSE 'jobs_retry_schedule_bounded' END;
    END IF;
END;
$$;
COMMENT ON FUNCTION courier.check_job_settings(text, integer, interval[]) IS
    'Raises check_violation (SQLSTATE 23514, with the rule''s constraint name) unless the queue name is 1-128 of '
    'A-Z a-z 0-9 _ . : -, max_attempts is 1-1000 and the retry schedule is NULL or holds 1 to 100 delays of 0 to 30 days.';

CREATE FUNCTION courier.jobs_check_settings_inserted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- Once per distinct value: usually once for a whole bulk insert.
    PERFORM courier.check_job_settings(s.queue, s.max_attempts, s.retry_schedule)
    FROM (SELECT DISTINCT n.queue, n.max_attempts, n.retry_schedule FROM new_jobs n) s;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION courier.jobs_check_settings_inserted() IS
    'Statement trigger: refuses an INSERT into courier.jobs when a row''s queue, max_attempts or retry schedule '
    'breaks courier.check_job_settings (SQLSTATE 23514); each distinct combination is checked once.';

-- Statement triggers fire in name order: a row with a bad request and a bad setting is reported
-- by jobs_check_inserted (22023) first.
CREATE TRIGGER jobs_check_settings_inserted AFTER INSERT ON courier.jobs REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION courier.jobs_check_settings_inserted();

CREATE FUNCTION courier.jobs_check_settings_updated() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM courier.check_job_settings(NEW.queue, NEW.max_attempts, NEW.retry_schedule);
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION courier.jobs_check_settings_updated() IS
    'Row trigger: refuses an UPDATE that sets a job''s queue, max_attempts or retry schedule to a value '
    'courier.check_job_settings refuses (SQLSTATE 23514).';

-- AFTER, not BEFORE: with any BEFORE UPDATE row trigger on the table, even one whose columns an
-- UPDATE does not set, PostgreSQL locks each row again before the update and computes the
-- generated column host (courier.url_host, a regular expression) anew: under callgrind that
-- cost a delivered job about 100,000 instructions more, a fifth of what it costs the server.
CREATE TRIGGER jobs_check_settings_updated AFTER UPDATE OF queue, max_attempts, retry_schedule ON courier.jobs
    FOR EACH ROW EXECUTE FUNCTION courier.jobs_check_settings_updated();

ALTER TABLE courier.jobs
    DROP CONSTRAINT jobs_queue_valid,
    DROP CONSTRAINT jobs_max_attempts_positive,
    DROP CONSTRAINT jobs_retry_schedule_bounded;
