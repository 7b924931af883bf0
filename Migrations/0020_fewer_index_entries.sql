-- 0020: a delivered job takes two index entries fewer, and the one it still takes for running
-- is cheaper.
--
-- jobs_state_queue_idx (state, queue, id) held every row, so the claim (pending to running) and
-- the outcome (running to succeeded) each added an entry. Running jobs are few and all in
-- jobs_host_running_idx; succeeded jobs are all in jobs_retention_idx (state, queue,
-- finished_at), which every final state has. The index now holds the waiting, dead and
-- cancelled jobs only: a job that succeeds at its first attempt takes its one entry at enqueue.
-- The readers that walked it for every state (the queue names, whether a queue exists, the
-- counts of `courier stats`) read running jobs through jobs_host_running_idx and succeeded ones
-- through jobs_retention_idx. A query of your own that filters on state = 'succeeded' should say
-- `finished_at IS NOT NULL` too, so PostgreSQL can use jobs_retention_idx.
--
-- jobs_host_running_idx was keyed by host alone: with one busy host every entry had the same key,
-- and each insert went into one long list of duplicates. Keyed by (host, id), each entry goes in
-- at the end of its host's range. Counting a host's running jobs reads the same entries.
--
-- Counted with callgrind on the server, a claim-like and an outcome-like UPDATE of 100 jobs
-- (pgbench, one host): 233,900 instructions per job before, 200,600 after.
--
-- Both indexes are built again over the whole table, and claims and outcomes wait for it.

DROP INDEX courier.jobs_state_queue_idx;
CREATE INDEX jobs_state_queue_idx ON courier.jobs (state, queue, id)
    WHERE state IN ('pending', 'retrying', 'dead', 'cancelled');
COMMENT ON INDEX courier.jobs_state_queue_idx IS
    'Waiting, dead and cancelled jobs by state and queue, newest last: listings and counts. Running jobs are in '
    'jobs_host_running_idx, succeeded ones in jobs_retention_idx.';

DROP INDEX courier.jobs_host_running_idx;
CREATE INDEX jobs_host_running_idx ON courier.jobs (host, id) WHERE state = 'running';
COMMENT ON INDEX courier.jobs_host_running_idx IS
    'Running jobs per host: the claim counts them against the host''s cap; every reader of running jobs.';
