-- 0015: an outcome no longer locks its job a second time to write its attempt row.
--
-- courier.attempts.job_id referenced courier.jobs (id) ON DELETE CASCADE. Every attempt row the
-- outcome statement writes therefore ran the foreign key's check: a query per row that locks
-- the job FOR KEY SHARE, the same job the statement has just updated. Measured with
-- pg_stat_statements over a 20,000-job drain: one more WAL record (57 bytes) and one more query
-- per delivered job, about 3 us of PostgreSQL's time; deleting a finished job ran one more query
-- per job to delete its attempts.
--
-- The outcome statement writes an attempt row only for a job it has just updated, or one that
-- still exists (WorkerStatements.completeBatch), so the check guarded nothing the statement
-- does not already guard. The cascade becomes one statement trigger that deletes the attempts
-- of every job a DELETE removed in one join, and TRUNCATE of courier.jobs truncates
-- courier.attempts too. An attempt row written for a job that an operator deletes at that very
-- moment may outlive it; nothing reads attempts without their job.

ALTER TABLE courier.attempts DROP CONSTRAINT attempts_job_id_fkey;
COMMENT ON COLUMN courier.attempts.job_id IS
    'The job (courier.jobs.id); its attempts are deleted with it by the trigger jobs_delete_attempts.';

CREATE FUNCTION courier.jobs_delete_attempts() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE courier.attempts;
    ELSE
        DELETE FROM courier.attempts a WHERE a.job_id = ANY (ARRAY(SELECT d.id FROM deleted_jobs d));
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION courier.jobs_delete_attempts() IS
    'Statement trigger: deletes the attempt rows of the jobs a DELETE removed (by attempts_job_idx, one array of ids), '
    'and empties courier.attempts when courier.jobs is truncated.';
REVOKE EXECUTE ON FUNCTION courier.jobs_delete_attempts() FROM PUBLIC;

CREATE TRIGGER jobs_delete_attempts AFTER DELETE ON courier.jobs
    REFERENCING OLD TABLE AS deleted_jobs FOR EACH STATEMENT EXECUTE FUNCTION courier.jobs_delete_attempts();
COMMENT ON TRIGGER jobs_delete_attempts ON courier.jobs IS 'A deleted job''s attempts go with it.';
CREATE TRIGGER jobs_truncate_attempts AFTER TRUNCATE ON courier.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION courier.jobs_delete_attempts();
COMMENT ON TRIGGER jobs_truncate_attempts ON courier.jobs IS 'Truncating the jobs truncates their attempts.';
