-- 0010: a claim reads only the jobs of the queues it may take, a claim writes one index entry
-- fewer per job, and a heartbeat rewrites no index.
--
-- 1. Lanes. Since 0005 a claim walked each host's due jobs through jobs_host_due_idx (host,
--    priority, run_at, id) and filtered the queue as it went. Jobs of a paused queue, or of a
--    queue that other workers serve, lie in that walk ahead of the jobs it may take: measured
--    with 100,000 due jobs of another queue at the same host, a claim of 100 took 90 ms
--    instead of 4 (a paused queue's backlog does the same to every queue sharing its host).
--    jobs_lane_due_idx adds the queue after the host, so a claim finds the (host, queue) pairs
--    with waiting jobs by one probe each, drops the pairs of other and paused queues before
--    reading any of their jobs, and reads each remaining pair's jobs in claim order.
--    jobs_host_due_idx goes: every query that read it by host reads the new index by its first
--    column.
--
-- 2. jobs_lease_idx (locked_until) WHERE state = 'running', from 0001, let the lease rescue find
--    expired leases in order. Since 0005, jobs_host_running_idx (host) WHERE state = 'running'
--    indexes the same rows: at most the fleet's concurrency (a few thousand), so the rescue reads
--    them all through it and sorts the expired ones, a fraction of a millisecond. What the second
--    index cost:
--      * every claim wrote an entry in it for each job (about 0.15 ms of a claim of 100);
--      * every heartbeat moves locked_until, and with locked_until indexed no heartbeat could be
--        a HOT update: each extension of each lease wrote a new entry in every index that holds
--        running jobs (the primary key, jobs_state_queue_idx, jobs_host_running_idx and this
--        one). Without it a heartbeat changes no indexed column, so PostgreSQL writes the new
--        version on the same page (fillfactor 85 leaves room) and touches no index.
--
-- Building the new index reads the due jobs once; workers and producers wait meanwhile (seconds
-- for a million due jobs). Every row is kept.
CREATE INDEX jobs_lane_due_idx ON courier.jobs (host, queue, priority, run_at, id)
    WHERE state IN ('pending', 'retrying');
COMMENT ON INDEX courier.jobs_lane_due_idx IS
    'Serves the claim: the (host, queue) pairs with waiting jobs, and each pair''s due jobs in claim order.';
DROP INDEX IF EXISTS courier.jobs_host_due_idx;
DROP INDEX IF EXISTS courier.jobs_lease_idx;
