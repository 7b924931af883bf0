-- 0016: a finished job takes one index entry fewer.
--
-- Every job that finishes (succeeded, dead or cancelled) took an entry in jobs_finished_idx
-- (finished_at) and one in jobs_retention_idx (state, queue, finished_at), which holds the same
-- rows. Measured with pg_stat_statements over a 50,000-job drain: the outcome statement wrote
-- 9.75 WAL records per job, one of them this entry.
--
-- Its readers now find the same rows in jobs_retention_idx: they first list the (state, queue)
-- pairs that have finished rows by skipping along it (one probe per pair), then read each pair's
-- range of finished_at. Those are the purge (`courier purge`: the count and each batch, oldest
-- first) and the last hour of `courier stats`. Listings filtered by finished_at walk the primary
-- key or jobs_state_queue_idx, as they did when another filter or the order chose those.

DROP INDEX courier.jobs_finished_idx;
