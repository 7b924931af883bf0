-- 0019: an attempt row takes one index entry fewer.
--
-- courier.attempts had a primary key on id and attempts_job_idx on (job_id, id): two entries
-- per attempt row holding the same ids. No reader looks an attempt up by its id alone; each names
-- the job: a job's history (`courier jobs show`, the console), the outcome statement's check for
-- an attempt row already written, and the trigger that deletes a deleted job's attempts. So the
-- primary key becomes (job_id, id), which serves all three, and attempts_job_idx goes. Measured
-- with pg_stat_statements over a 30,000-job drain: the outcome statement wrote 8.73 WAL records
-- per job before, 7.72 after. A query of your own that looks an attempt up by id alone now reads
-- the whole table: name its job_id too.
--
-- The new key is built over every attempt row kept, and outcome writes wait for it: 1.3 s for
-- 5,000,000 rows on a 2-core machine.

ALTER TABLE courier.attempts DROP CONSTRAINT attempts_pkey;
DROP INDEX courier.attempts_job_idx;
ALTER TABLE courier.attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY (job_id, id);
COMMENT ON INDEX courier.attempts_pkey IS
    'A job''s attempts in order: its history, the outcome statement''s check for a row already written, '
    'and deletion with the job.';
COMMENT ON FUNCTION courier.jobs_delete_attempts() IS
    'Statement trigger: deletes the attempt rows of the jobs a DELETE removed (by attempts_pkey, one array of ids), '
    'and empties courier.attempts when courier.jobs is truncated.';
