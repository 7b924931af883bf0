import Foundation
import Postgres

/// The statements of the worker's hot path and of maintenance. Each is one round trip for a
/// whole batch; every state change is guarded by the state (and attempt, and lease holder) it
/// expects, so a late writer can never overwrite a newer outcome.
///
/// Times come from the server's clock (`now()`), shared by every worker host; tests move jobs
/// in time by editing `run_at` / `locked_until` instead.
public enum WorkerStatements {
    /// What `claimBatch` takes.
    public struct ClaimBatch: Sendable {
        /// Only these queues, or nil for all.
        public var queues: [String]?
        /// The worker that will hold the leases.
        public var workerID: String
        /// The most jobs.
        public var limit: Int
        /// How long the lease lasts.
        public var lease: Duration
        /// The in-flight cap of a host without its own (`--per-host-limit`).
        public var defaultHostCap: Int
        /// The lanes (host and queue) `lockDestinations` found due jobs in, at the hosts it locked.
        public var lanes: [Lane]

        /// A claim.
        public init(
            queues: [String]?, workerID: String, limit: Int, lease: Duration, defaultHostCap: Int,
            lanes: [Lane]
        ) {
            self.queues = queues
            self.workerID = workerID
            self.limit = limit
            self.lease = lease
            self.defaultHostCap = defaultHostCap
            self.lanes = lanes
        }
    }

    /// The due jobs of one queue at one host: a claim reads each lane through its own range of
    /// `jobs_lane_due_idx`, so the jobs of other queues, and of paused ones, are never read.
    public struct Lane: Sendable, Equatable {
        /// The destination host.
        public var host: String
        /// The queue.
        public var queue: String

        /// A lane.
        public init(host: String, queue: String) {
            self.host = host
            self.queue = queue
        }
    }

    /// Settings of the claim's own transaction, as one statement (`set_config(..., true)` is
    /// `SET LOCAL`), so it can travel in the claim's pipeline right after BEGIN.
    ///
    /// `synchronous_commit = off`: the claim need not wait for its WAL flush. Lost in a crash,
    /// it leaves the jobs due exactly as before; on a disk that flushes in ~4 ms this halves
    /// the flushes a delivery waits for. Outcomes (`completeBatch`) still wait.
    ///
    /// `enable_sort = off`: a lane's due jobs come from `jobs_lane_due_idx` in claim order, never
    /// from another index and a sort. The planner would choose one when its statistics are stale:
    /// after a burst of enqueues into a table that holds millions of finished jobs, autoanalyze
    /// waits for 2 % of the table to change, the planner believes nothing is due, and a claim
    /// of 100 read and sorted all 94,000 due jobs (0.9 s a claim, measured). With sorts off, the
    /// index order is the only cheap way, whatever the statistics say.
    ///
    /// `plan_cache_mode = force_generic_plan`: the two claim statements are planned once per
    /// connection, not on every claim (planning them cost 2.8 ms per claim, more than running
    /// them); their parameters are lists and limits, so a custom plan has nothing to gain.
    ///
    /// `enable_bitmapscan = off`: a host's running jobs are counted, and its due jobs read,
    /// through plain index scans, which mark the entries of rows that are gone for good as dead
    /// so the next claim skips them; a bitmap scan never does. With 1,000 hosts the generic plan
    /// sometimes counted each host's running jobs by a bitmap scan of `jobs_host_running_idx`,
    /// and every claim visited the heap for every job that had finished at that host since the
    /// last vacuum (18 pages per host, a third of the claim's reads; fanout's PostgreSQL CPU per
    /// job went from about 140 to 180 µs in the runs that got that plan).
    ///
    /// `jit = off`: the sorts that remain (ordering a few hosts and one batch) carry the
    /// planner's penalty for disabled nodes, which pushes the estimate over `jit_above_cost`;
    /// compiling the statement took 0.9 s on every claim. A claim touches a few hundred rows;
    /// JIT never pays for itself here.
    public static let claimSettings = Statement<Void>("""
        SELECT set_config('synchronous_commit', 'off', true), set_config('enable_sort', 'off', true),
               set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true),
               set_config('enable_bitmapscan', 'off', true)
        """, planning: .prepared)

    /// What `lockDestinations` takes.
    public struct LockDestinations: Sendable {
        /// Only these queues, or nil for all.
        public var queues: [String]?
        /// The most lanes to take from the round (and, apart, the most gates).
        public var limit: Int
        /// The lane the previous claim of this loop ended its round at (`ClaimResult.cursor`);
        /// nil starts at the first lane.
        public var after: Lane?

        /// A lookup of the hosts to claim from.
        public init(queues: [String]?, limit: Int, after: Lane?) {
            self.queues = queues
            self.limit = limit
            self.after = after
        }
    }

    /// The first statement of a claim: finds up to `$2` lanes (host and queue) with due jobs
    /// whose host may start something, going round the lanes in (host, queue) order from the
    /// one after lane (`$3`, `$4`) where this loop's previous claim stopped, and locks their
    /// hosts' destination rows in host order for the rest of the transaction (creating missing
    /// rows). `$1`: the queues (NULL: all); paused queues are left out.
    ///
    /// Why a round and not the hosts whose first job is oldest: choosing those needs every
    /// host's first job on every claim, one probe per host with waiting jobs, so with 1,000
    /// hosts a claim of 100 read 1,000 lanes and sorted them (68 µs of PostgreSQL's CPU per
    /// job). The round reads lanes only until it has `$2` that can start something, and reads
    /// all of them only when fewer than that can. When fewer lanes than `$2` have due jobs, a
    /// claim takes them all, as before; with more, every lane gets its turn within (lanes /
    /// `$2`) claims, and priority orders jobs within a lane and within a claim, not across
    /// lanes that wait for their turn.
    ///
    /// 1. `lanes` walks `jobs_lane_due_idx` by a skip scan (one index probe per lane), lazily:
    ///    only as far as the rest of the statement asks. Pass 1 goes from the lane after the
    ///    cursor to the last lane; pass 2 from the first lane to the cursor's. The branches of
    ///    each step are switched by `l.pass` (one-time filters), so each probe has index bounds.
    ///    The skip scan's row is the lane's first job in claim order (`priority, run_at, id`);
    ///    `heads` takes a second probe only for a lane whose first job waits for later, to find
    ///    its first due one. Lanes of other queues and of paused ones are dropped here, before
    ///    any of their jobs is read.
    /// 2. `round` keeps the lanes whose host can start something now (read without a lock: not
    ///    disabled, breaker closed or its probe due, a rate token left; whether a host is at its
    ///    cap is counted once, under the lock, by `claimBatch`), at most `$2`. Its LIMIT is what
    ///    stops the walk.
    /// 3. `gates`: the heads of gates (`gateHeads`) at hosts that can start something, oldest
    ///    first, at most `$2`. There are as many as endpoints with an open breaker or ordered
    ///    delivery, not one per host.
    /// 4. The hosts of both are locked with INSERT ... ON CONFLICT DO UPDATE, in host order,
    ///    the order every writer of destination rows locks in. A host held by another claimer is
    ///    waited for: its claim commits before this one counts. `claimed_at` is kept to the
    ///    second: a row claimed within the last second is locked (the WHERE of DO UPDATE locks
    ///    every conflicting row) but not written, so a busy host is not rewritten by every
    ///    claim. The statement takes every lock before it ends.
    ///
    /// Returns the lanes to claim from as (host, queue, pass): a gate's lane that the round did
    /// not take first, with pass NULL, then the round's lanes in the order they were walked, so
    /// the last row is where the next claim's round starts after.
    public static let lockDestinations = Statement<LockDestinations>("""
        WITH RECURSIVE lanes AS (
            (SELECT * FROM (
                (SELECT j.host, j.queue, j.priority, j.run_at, j.id, 1 AS pass FROM courier.jobs j
                 WHERE j.state IN ('pending', 'retrying') AND j.gate IS NULL AND (j.host, j.queue) > ($3, $4)
                 ORDER BY j.host, j.queue, j.priority, j.run_at, j.id LIMIT 1)
                UNION ALL
                (SELECT j.host, j.queue, j.priority, j.run_at, j.id, 2 FROM courier.jobs j
                 WHERE j.state IN ('pending', 'retrying') AND j.gate IS NULL AND (j.host, j.queue) <= ($3, $4)
                 ORDER BY j.host, j.queue, j.priority, j.run_at, j.id LIMIT 1)
                LIMIT 1) first_lane)
            UNION ALL
            SELECT n.host, n.queue, n.priority, n.run_at, n.id, n.pass
            FROM lanes l
            CROSS JOIN LATERAL (
                (SELECT j.host, j.queue, j.priority, j.run_at, j.id, 1 AS pass FROM courier.jobs j
                 WHERE l.pass = 1 AND j.state IN ('pending', 'retrying') AND j.gate IS NULL
                   AND (j.host, j.queue) > (l.host, l.queue)
                 ORDER BY j.host, j.queue, j.priority, j.run_at, j.id LIMIT 1)
                UNION ALL
                (SELECT j.host, j.queue, j.priority, j.run_at, j.id, 2 FROM courier.jobs j
                 WHERE l.pass = 2 AND j.state IN ('pending', 'retrying') AND j.gate IS NULL
                   AND (j.host, j.queue) > (l.host, l.queue) AND (j.host, j.queue) <= ($3, $4)
                 ORDER BY j.host, j.queue, j.priority, j.run_at, j.id LIMIT 1)
                UNION ALL
                (SELECT j.host, j.queue, j.priority, j.run_at, j.id, 2 FROM courier.jobs j
                 WHERE l.pass = 1 AND j.state IN ('pending', 'retrying') AND j.gate IS NULL
                   AND (j.host, j.queue) <= ($3, $4)
                 ORDER BY j.host, j.queue, j.priority, j.run_at, j.id LIMIT 1)
                LIMIT 1
            ) n
        ),
        heads AS (
            SELECT l.host, l.queue, l.pass
            FROM lanes l
            CROSS JOIN LATERAL (
                SELECT l.id WHERE l.run_at <= now()
                UNION ALL
                (SELECT j.id FROM courier.jobs j
                 WHERE l.run_at > now() AND j.host = l.host AND j.queue = l.queue AND \(dueOfLane)
                 LIMIT 1)
            ) head
            WHERE \(openLane)
        ),
        round AS (
            SELECT h.host, h.queue, h.pass FROM heads h
            WHERE NOT EXISTS (\(hostCannotStart("h")))
            LIMIT $2
        ),
        gate_heads AS (\(gateHeads)),
        gates AS (
            SELECT g.host, g.queue FROM gate_heads g
            WHERE NOT EXISTS (\(hostCannotStart("g")))
            ORDER BY g.priority, g.run_at, g.id
            LIMIT $2
        ),
        locked AS (
            INSERT INTO courier.destinations AS d (host, claimed_at)
            SELECT c.host, now() FROM (SELECT r.host FROM round r UNION SELECT g.host FROM gates g) c ORDER BY c.host
            ON CONFLICT (host) DO UPDATE SET claimed_at = now()
                WHERE d.claimed_at IS NULL OR d.claimed_at < now() - interval '1 second'
        )
        SELECT r.host, r.queue, r.pass FROM round r
        UNION ALL
        SELECT DISTINCT g.host, g.queue, NULL::int FROM gates g
        WHERE NOT EXISTS (SELECT 1 FROM round r WHERE r.host = g.host AND r.queue = g.queue)
        ORDER BY pass NULLS FIRST, host, queue
        """, planning: .prepared) {
        [$0.queues.map { PostgresArray($0) }, $0.limit, $0.after?.host ?? "", $0.after?.queue ?? ""]
    }

    /// The destination row of host `alias.host` if it cannot start anything now: disabled, its
    /// breaker open with the probe not yet due, or no rate token left. A host without a row can.
    static func hostCannotStart(_ alias: String) -> String {
        """
        SELECT 1 FROM courier.destinations d
                WHERE d.host = \(alias).host
                  AND (d.disabled_at IS NULL AND (d.opened_at IS NULL OR d.probe_at <= now())
                       AND courier.destination_tokens(d.rate_limit, d.tokens, d.tokens_at) >= 1) IS NOT TRUE
        """
    }

    /// The second statement of a claim, in the transaction that locked the destinations: claims
    /// up to `$3` due jobs for worker `$2` with a lease of `$4` ms from the lanes `lockDestinations`
    /// returned (`$6` hosts and `$7` queues, pairwise), within each host's room (`$5`: the
    /// in-flight cap of a host without its own); `$1` restricts the queues (NULL = all).
    ///
    /// Its snapshot is taken after the locks, so every claim of these hosts that went before
    /// has committed and its running jobs are counted: the caps hold across all workers. A job
    /// whose outcome is being written meanwhile still counts, which errs on the safe side.
    ///
    /// 1. `rooms`: per host, its cap minus its running jobs, within its rate tokens, one probe
    ///    when its breaker is half-open. Each distinct host looks its destination row up by the
    ///    primary key in a LATERAL subquery (its LIMIT keeps the planner from merging it into a
    ///    join it could turn inside out). With `d.host = ANY ($6)` the planner, which takes a
    ///    parameter array for ten elements, chose a sequential scan whenever `destinations` had
    ///    not been analyzed since its rows arrived (a worker's first minutes among new hosts,
    ///    every benchmark) and compared each row with each of the claim's hosts: 1,000 x 100
    ///    text comparisons, 2 ms of every claim with 1,000 receivers.
    /// 2. Each host gets its room, at most twice an equal share of the batch (a host with fewer
    ///    due jobs leaves its share to the others), and one job when there are at least as many
    ///    hosts as the batch holds: every host `lockDestinations` returned has a due job, so one
    ///    each fills the batch, and each row locked beyond it was a lock (a heap write and a WAL
    ///    record) for nothing. `lane_jobs` locks up to that many due jobs of each of its lanes
    ///    with `FOR UPDATE SKIP LOCKED`, `picked` keeps the host's first ones in claim order
    ///    (`priority, run_at, id`) over its lanes, and `chosen` interleaves the hosts (every
    ///    host's first job, then every host's second, ...), so a backlog for one host never
    ///    delays another host's job by more than one claim.
    /// 3. What `claimedColumns` needs of a job's queue and host travels with the job from where
    ///    it was read once: a lane job's queue settings from `queue_settings` (one lookup per
    ///    queue of the claim; a gate's job, a few per claim, looks its queue up itself), the
    ///    host's `disable_on_gone` from `rooms`, and the row's address (`ctid`) from the lock, so
    ///    `claimed` updates each row through it (a TID scan, with the id checked again) instead
    ///    of looking the job, its queue and its destination up by their keys once per job. The
    ///    locked row cannot move: this transaction holds its lock. One rare case differs: a row
    ///    changed and committed after this statement's snapshot is locked at a version the
    ///    snapshot cannot see, so the TID scan finds nothing and the job stays due, locked only
    ///    until this transaction ends; the next claim takes it (looked up by its key, it was
    ///    claimed at once). With one receiver the change is 4.8 % of the worker's backend
    ///    (callgrind, 331,900 to 315,800 instructions per job in a 10,000-job drain), with 1,000
    ///    receivers 2.6 %.
    /// 4. `spent` takes rate tokens for the jobs started, and moves a half-open breaker's next
    ///    probe one cool-down on; it looks up only the hosts `rooms` found limited or probing.
    ///
    /// Returns the claimed jobs in no particular order: the columns of `claimedColumns`, then
    /// `claim_place`, each job's place in the claim order (ascending, with a gap where a chosen
    /// job was left due, step 3), then `held_back`: true
    /// when some host's room is used up (it was at its cap, or this claim filled it), so freeing
    /// a slot there (an outcome written) is a reason to claim again. The caller puts the jobs
    /// in order by their places (`JobStore.claimBatch`): sorting the returned rows here copied
    /// every claimed row, body included, into a sort (6,000 instructions of the server per job,
    /// about 2 % of it, measured with callgrind). The place is numbered in `chosen`, whose
    /// ORDER BY already sorts by the same keys, and carried out of the UPDATE, so no join of the
    /// claimed and the chosen rows is needed (with the planner's estimate of one row that join
    /// was a nested loop of 100 x 100 comparisons, a millisecond per claim). When nothing was
    /// claimed the result is one row whose job columns are NULL.
    public static let claimBatch = Statement<ClaimBatch>("""
        WITH rooms AS MATERIALIZED (
            SELECT d.host,
                   coalesce(d.max_in_flight, $5)
                       - (SELECT count(*) FROM courier.jobs r WHERE r.host = d.host AND r.state = 'running') AS room,
                   d.opened_at IS NOT NULL AS probing, d.disable_on_gone,
                   floor(courier.destination_tokens(d.rate_limit, d.tokens, d.tokens_at)) AS tokens,
                   EXISTS (SELECT 1 FROM courier.endpoint_health g
                           WHERE g.host = d.host AND (g.opened_at IS NOT NULL OR g.disabled)) AS gated
            FROM (SELECT DISTINCT w.host FROM unnest($6::text[]) AS w(host)) h
            CROSS JOIN LATERAL (SELECT x.* FROM courier.destinations x WHERE x.host = h.host LIMIT 1) d
            WHERE d.disabled_at IS NULL AND (d.opened_at IS NULL OR d.probe_at <= now())
        ),
        allowed AS (
            SELECT r.host, r.room, r.gated, r.disable_on_gone,
                   greatest(0, least(r.room, CASE WHEN r.probing THEN 1 ELSE $3 END, r.tokens))::int AS allowance
            FROM rooms r
        ),
        shares AS (
            SELECT a.host, a.gated, a.disable_on_gone,
                   least(a.allowance, CASE WHEN count(*) OVER () >= $3 THEN 1
                                           ELSE ceil(2 * $3::float8 / count(*) OVER ()) END)::int AS take
            FROM allowed a
            WHERE a.allowance > 0
        ),
        queue_settings AS MATERIALIZED (
            SELECT w.queue, \(queueColumns)
            FROM (SELECT DISTINCT u.queue FROM unnest($7::text[]) AS u(queue)) w
            LEFT JOIN courier.queues q ON q.name = w.queue
        ),
        lane_jobs AS (
            SELECT c.id, c.tid, c.priority, c.run_at, l.queue, s.host, s.take,
                   \(queueColumnNames("qs")), s.disable_on_gone
            FROM shares s
            JOIN unnest($6::text[], $7::text[]) AS l(host, queue) ON l.host = s.host
            JOIN queue_settings qs ON qs.queue = l.queue
            CROSS JOIN LATERAL (
                SELECT j.id, j.ctid AS tid, j.priority, j.run_at FROM courier.jobs j
                WHERE j.host = l.host AND j.queue = l.queue
                  AND (NOT s.gated OR NOT EXISTS (
                      SELECT 1 FROM courier.endpoint_health g
                      WHERE g.key = courier.endpoint_key(j.endpoint_id, j.url)
                        AND courier.gate_closed(g.opened_at, g.disabled, g.ordered)))
                  AND \(dueOfLane)
                LIMIT s.take
                FOR UPDATE SKIP LOCKED
            ) c
            WHERE \(openLane)
        ),
        gate_heads AS (\(gateHeads)),
        gate_jobs AS (
            SELECT g.id, c.tid, g.priority, g.run_at, g.queue, s.host, s.take, g.key, g.probing,
                   \(queueColumns), s.disable_on_gone
            FROM shares s
            JOIN gate_heads g ON g.host = s.host
            CROSS JOIN LATERAL (
                SELECT j.ctid AS tid FROM courier.jobs j
                WHERE j.id = g.id AND j.state IN ('pending', 'retrying')
                FOR UPDATE SKIP LOCKED
            ) c
            LEFT JOIN courier.queues q ON q.name = g.queue
        ),
        picked AS (
            SELECT t.id, t.tid, t.priority, t.run_at, t.queue, t.host, t.turn, t.key, t.probing, \(laneColumnNames("t"))
            FROM (SELECT lj.*,
                         row_number() OVER (PARTITION BY lj.host ORDER BY lj.priority, lj.run_at, lj.id) AS turn
                  FROM (SELECT x.id, x.tid, x.priority, x.run_at, x.queue, x.host, x.take, NULL::text AS key, false AS probing,
                               \(laneColumnNames("x"))
                        FROM lane_jobs x
                        UNION ALL
                        SELECT y.id, y.tid, y.priority, y.run_at, y.queue, y.host, y.take, y.key, y.probing,
                               \(laneColumnNames("y"))
                        FROM gate_jobs y) lj) t
            WHERE t.turn <= t.take
        ),
        chosen AS (
            SELECT p.id, p.tid, p.queue, p.host, p.key, p.probing, \(laneColumnNames("p")),
                   row_number() OVER (ORDER BY p.turn, p.priority, p.run_at, p.id) AS place
            FROM picked p ORDER BY p.turn, p.priority, p.run_at, p.id LIMIT $3
        ),
        claimed AS (
            UPDATE courier.jobs j
            SET state = 'running', attempt = j.attempt + 1, locked_by = $2,
                locked_until = now() + $4::bigint * interval '1 millisecond', updated_at = now()
            FROM chosen
            WHERE j.ctid = chosen.tid AND j.id = chosen.id
        """ + claimedColumns(queue: "chosen", destination: "chosen") + """
            , chosen.place AS claim_place
        ),
        spent AS (
            UPDATE courier.destinations d
            SET tokens = CASE WHEN d.rate_limit IS NULL THEN d.tokens
                              ELSE courier.destination_tokens(d.rate_limit, d.tokens, d.tokens_at) - n.started END,
                tokens_at = CASE WHEN d.rate_limit IS NULL THEN d.tokens_at ELSE now() END,
                probe_at = CASE WHEN d.opened_at IS NOT NULL THEN now() + d.breaker_cooldown ELSE d.probe_at END,
                updated_at = now()
            -- Only hosts with a rate limit or a half-open breaker, as `rooms` read them under
            -- the claim's locks: a host with neither is not probed again for nothing (a fan-out
            -- claim of 200 hosts took 200 lookups here to change no row).
            FROM (SELECT c.host, count(*)::int AS started
                  FROM claimed c JOIN rooms r ON r.host = c.host
                  WHERE r.probing OR r.tokens <> 'Infinity'::float8
                  GROUP BY c.host) n
            WHERE d.host = n.host AND (d.rate_limit IS NOT NULL OR d.opened_at IS NOT NULL)
        ),
        probed AS (
            UPDATE courier.endpoint_health g
            SET probe_at = now() + coalesce(d.breaker_cooldown, interval '30 seconds')
            FROM chosen o
            JOIN claimed c ON c.id = o.id
            LEFT JOIN courier.destinations d ON d.host = o.host
            WHERE o.probing AND g.key = o.key AND g.opened_at IS NOT NULL
        )
        SELECT c.*, f.held_back
        FROM (SELECT EXISTS (SELECT 1 FROM allowed a WHERE a.room <= a.allowance)
                     OR EXISTS (SELECT 1 FROM gate_jobs) AS held_back) f
        LEFT JOIN claimed c ON true
        """, planning: .prepared) { claim in
        [
            claim.queues.map { PostgresArray($0) }, claim.workerID, claim.limit, claim.lease.inMilliseconds,
            claim.defaultHostCap, PostgresArray(claim.lanes.map(\.host)), PostgresArray(claim.lanes.map(\.queue)),
        ]
    }

    /// One lane's due jobs (the lane's host and queue come before it) in claim order: shared by
    /// `lockDestinations` and `claimBatch`, so both see the same jobs.
    static let dueOfLane = """
        j.state IN ('pending', 'retrying') AND j.gate IS NULL AND j.run_at <= now()
        ORDER BY j.priority, j.run_at, j.id
        """

    /// The head of each gate that may give a job now (`key`, its `host`, `queue`, `priority`,
    /// `run_at`, `id`, and `probing`: whether it is a half-open breaker's probe): shared by
    /// `lockDestinations` and `claimBatch`. A gate holds the waiting jobs of an endpoint whose
    /// breaker is open, that is disabled or that is ordered (migration 0014). A disabled
    /// endpoint gives nothing; a half-open breaker gives its first due job, one per cool-down
    /// (the claim moves `probe_at` on); an ordered endpoint gives its oldest delivery in
    /// publish (id) order, when it is due and none of its deliveries is running. Only gates of
    /// queues `$1` (NULL: all) that are not paused.
    static let gateHeads = """
        SELECT g.key, l.host, l.queue, l.priority, l.run_at, l.id, g.opened_at IS NOT NULL AS probing
            FROM courier.endpoint_health g
            CROSS JOIN LATERAL (
                SELECT j.id, j.host, j.queue, j.priority, j.run_at, j.state FROM courier.jobs j
                WHERE j.gate = g.key AND j.state IN ('pending', 'retrying', 'running')
                  AND (g.ordered OR (j.state <> 'running' AND j.run_at <= now()))
                ORDER BY j.id
                LIMIT 1
            ) l
            WHERE (g.opened_at IS NOT NULL OR g.ordered) AND NOT g.disabled
              AND (g.opened_at IS NULL OR g.probe_at <= now())
              AND l.state <> 'running' AND l.run_at <= now()
              AND NOT (g.ordered AND EXISTS (SELECT 1 FROM courier.jobs r WHERE r.gate = g.key AND r.state = 'running'))
              AND \(openLane)
        """

    /// Whether lane `l` may be claimed from: its queue is among `$1` (NULL: every queue) and not
    /// paused. Checked by both statements: a queue paused between them is not claimed from.
    static let openLane = """
        ($1::text[] IS NULL OR l.queue = ANY ($1::text[]))
              AND NOT EXISTS (SELECT 1 FROM courier.queues q WHERE q.name = l.queue AND q.paused)
        """

    /// The settings of queue `q` that `claimedColumns` reads: `claimBatch` reads them once per
    /// queue for its lanes (`queue_settings`; a gate's job joins its queue itself) and carries
    /// them with each job, beside the host's `disable_on_gone` (read once per host, in `rooms`).
    static let queueColumns = queueColumnNames("q")

    /// The columns of `queueColumns` as relation `alias` carries them.
    static func queueColumnNames(_ alias: String) -> String {
        [
            "retry_schedule", "signing_secret", "max_in_flight", "oauth_token_url", "oauth_client_id",
            "oauth_client_secret", "oauth_scope", "oauth_audience",
        ].map { "\(alias).\($0)" }.joined(separator: ", ")
    }

    /// The columns of `queueColumns` and the host's `disable_on_gone` as relation `alias`
    /// carries them.
    static func laneColumnNames(_ alias: String) -> String {
        queueColumnNames(alias) + ", \(alias).disable_on_gone"
    }

    /// What a claim returns for each job (shared by `claimBatch` and `claimOne`; `q` and `dst`
    /// name the relations that give the job's queue settings and its host's `disable_on_gone`:
    /// `claimOne` joins the tables themselves, `claimBatch` reads both from `chosen`): the
    /// request, the effective retry schedule in seconds (job's, else queue's, NULL for the
    /// default; its subquery runs only for a job that has one, not once per job for nothing),
    /// the queue's signing secret and cap, the host, postponements so far, what a 410 does
    /// there, the queue's OAuth2 client credentials (token URL, client id, secret, scope,
    /// audience), and for a webhook delivery its endpoint and that endpoint's valid sealed
    /// secrets (hex, newest first, space-separated; plain jobs skip the lookup), and last the
    /// body's size. A body larger than `Defaults.inlineBodyBytes` comes back NULL: the worker
    /// reads it with `loadBody` when its delivery has room in the body budget (`octet_length`
    /// reads the stored size, not the value). The worker reads these columns in binary
    /// (`JobStore.claimBatch`), so each is of a type whose binary form `PostgresRow.decode`
    /// reads: integers, booleans, texts and `bytea` (the schedule is sent as its array's text).
    static func claimedColumns(queue q: String, destination dst: String) -> String {
        """

        RETURNING j.id, j.queue, j.method, j.url, j.headers::text,
            CASE WHEN octet_length(j.body) <= \(Defaults.inlineBodyBytes) THEN j.body END AS body,
            j.attempt, j.max_attempts,
            CASE WHEN j.retry_schedule IS NOT NULL OR \(q).retry_schedule IS NOT NULL THEN
                (SELECT array_agg(extract(epoch FROM s.delay)::float8 ORDER BY s.n)
                 FROM unnest(coalesce(j.retry_schedule, \(q).retry_schedule)) WITH ORDINALITY AS s(delay, n))::text
            END AS schedule_seconds,
            \(q).signing_secret, \(q).max_in_flight, j.host, j.postponements,
            j.endpoint_id IS NOT NULL OR \(dst).disable_on_gone,
            \(q).oauth_token_url, \(q).oauth_client_id, \(q).oauth_client_secret, \(q).oauth_scope, \(q).oauth_audience,
            j.endpoint_id,
            CASE WHEN j.endpoint_id IS NOT NULL THEN
                (SELECT string_agg(encode(s.sealed, 'hex'), ' ' ORDER BY s.id DESC)
                 FROM courier.endpoint_secrets s
                 WHERE s.endpoint_id = j.endpoint_id AND (s.expires_at IS NULL OR s.expires_at > now()))
            END AS sealed_secrets,
            j.traceparent, coalesce(octet_length(j.body), 0) AS body_size
        """
    }

    /// The body of running job `$1`, attempt `$2`, while worker `$3` holds it: no row once the
    /// lease was lost (the job was rescued, cancelled or deleted).
    public static let loadBody = Statement<(id: Int64, attempt: Int, workerID: String)>("""
        SELECT body FROM courier.jobs
        WHERE id = $1 AND attempt = $2 AND locked_by = $3 AND state = 'running'
        """, planning: .prepared) { [$0.id, $0.attempt, $0.workerID] }

    /// The ids `claimBatch` would take (`$1` queues or NULL, `$2` limit), without locking
    /// them: the fallback when the batch statement failed on some row's data, so each
    /// candidate can be claimed (or dead-lettered) on its own.
    public static let claimCandidates = Statement<(queues: [String]?, limit: Int)>(dueInClaimOrder + """

        LIMIT $2
        """, planning: .prepared) { [$0.queues.map { PostgresArray($0) }, $0.limit] }

    /// The ids of due jobs in claim order (`$1` queues or NULL for all; paused queues left
    /// out): the candidates of `claimBatch` and `claimCandidates`, so both pick the same rows.
    static let dueInClaimOrder = """
        SELECT j.id
        FROM courier.jobs j
        WHERE j.state IN ('pending', 'retrying')
          AND j.run_at <= now()
          AND ($1::text[] IS NULL OR j.queue = ANY ($1::text[]))
          AND NOT EXISTS (SELECT 1 FROM courier.queues q WHERE q.name = j.queue AND q.paused)
        ORDER BY j.priority, j.run_at, j.id
        """

    /// Claims job `$1` alone for worker `$2` with a lease of `$3` ms, if it is still due and
    /// not locked by another claimer; returns the same columns as `claimBatch`.
    public static let claimOne = Statement<(id: Int64, workerID: String, lease: Duration)>("""
        WITH due AS (
            SELECT j.id, j.queue, j.host FROM courier.jobs j
            WHERE j.id = $1 AND j.state IN ('pending', 'retrying') AND j.run_at <= now()
            FOR UPDATE SKIP LOCKED
        )
        UPDATE courier.jobs j
        SET state = 'running', attempt = j.attempt + 1, locked_by = $2,
            locked_until = now() + $3::bigint * interval '1 millisecond', updated_at = now()
        FROM due
        LEFT JOIN courier.queues q ON q.name = due.queue
        LEFT JOIN courier.destinations dst ON dst.host = due.host
        WHERE j.id = due.id
        """ + claimedColumns(queue: "q", destination: "dst"), planning: .prepared) { [$0.id, $0.workerID, $0.lease.inMilliseconds] }

    /// Moves due job `$1`, whose row no claim can take, to `dead` with reason `$2`. Values the
    /// row's constraints could reject are clamped, so the dead row is a valid one.
    public static let quarantineDue = Statement<(id: Int64, reason: String)>("""
        UPDATE courier.jobs
        SET state = 'dead', finished_at = now(), updated_at = now(), locked_by = NULL, locked_until = NULL,
            attempt = least(greatest(attempt, 0), max_attempts), last_status = NULL, last_error = $2
        WHERE id = $1 AND state IN ('pending', 'retrying')
        """, planning: .prepared) { [$0.id, $0.reason] }

    /// Moves running job `$1` (attempt `$2`, held by worker `$3`) to `dead` with reason `$4`:
    /// its row could not be read, or its outcome could not be written.
    public static let quarantineRunning = Statement<(id: Int64, attempt: Int, workerID: String, reason: String)>("""
        UPDATE courier.jobs
        SET state = 'dead', finished_at = now(), updated_at = now(), locked_by = NULL, locked_until = NULL,
            attempt = least(greatest(attempt, 0), max_attempts), last_error = $4
        WHERE id = $1 AND state = 'running' AND attempt = $2 AND locked_by = $3
        """, planning: .prepared) { [$0.id, $0.attempt, $0.workerID, $0.reason] }

    /// Records a batch of outcomes in one round trip: moves each job out of `running`, writes
    /// one `courier.attempts` row per request sent (the attempt's, and one per request repeated
    /// in process before it) and tells each destination what its receiver did.
    ///
    /// Parameters are parallel arrays (one element per row): `$1` ids, `$2` attempts,
    /// `$3` target states, `$4` retry delays in ms (NULL unless retrying), `$5` statuses,
    /// `$6` errors, `$7` started_at and `$8` finished_at (microseconds since 1970), `$9` excerpts,
    /// `$11` whether the attempt is spent (false for a postponed or parked job: its attempt count
    /// goes back by one, and a job with no counted attempt left is `pending`), `$12` how many
    /// postponements to add, `$13` the destination signals (the verdicts'
    /// `DeliveryPolicy.DestinationSignal`), `$14` whether the row is a request repeated in
    /// process within the attempt (history only: it moves no job and signals nothing; migration
    /// 0008); `$10` the worker id; `$15` and `$16` the fleet-wide ``EndpointDisable`` (seconds,
    /// dead deliveries in a row).
    ///
    /// The job update is guarded by `state = 'running' AND attempt AND locked_by`, so an
    /// outcome that arrives after a rescue changes nothing; its attempt row is still kept as
    /// history while the job exists. Writing the same outcome twice (a retry after a COMMIT
    /// whose answer was lost) adds no second attempt row: a row that changed no job is written
    /// only when no row of that job, attempt and start time exists. Destination signals count
    /// only for jobs whose state changed, in batch order: the host hears what is its fault
    /// (`courier.record_destination_outcomes`), the endpoint what is its own
    /// (`courier.record_endpoint_outcomes`, migration 0014: its breaker and gate, auto-disable,
    /// `courier.message.failed`).
    /// Returns the ids whose state changed.
    public static let completeBatch = Statement<
        (records: [AttemptRecord], workerID: String, endpointDisable: EndpointDisable)
    >("""
        WITH outcome AS (
            -- Times come as microseconds since 1970: a timestamp parsed from text per element
            -- cost the server more than the rest of reading the arrays.
            SELECT o.id, o.attempt, o.state, o.delay_ms, o.status, o.error,
                   timestamptz 'epoch' + o.started_us * interval '1 microsecond' AS started_at,
                   timestamptz 'epoch' + o.finished_us * interval '1 microsecond' AS finished_at,
                   (o.finished_us - o.started_us) / 1000.0::float8 AS duration_ms,
                   o.excerpt, o.spent, o.postponed, o.signal, o.in_process, o.n
            -- The arrays are unnested side by side in a select list: in FROM, each array would be
            -- its own function scan whose rows are first copied into a store of their own. The
            -- place is counted by row_number: generate_subscripts would make the planner expect
            -- a thousand outcomes and scan every job for them.
            FROM (SELECT a.*, row_number() OVER () AS n
                  FROM (SELECT unnest($1::bigint[]) AS id, unnest($2::int[]) AS attempt,
                         unnest($3::courier.job_state[]) AS state, unnest($4::float8[]) AS delay_ms,
                         unnest($5::int[]) AS status, unnest($6::text[]) AS error,
                         unnest($7::bigint[]) AS started_us, unnest($8::bigint[]) AS finished_us,
                         unnest($9::text[]) AS excerpt, unnest($11::boolean[]) AS spent,
                         unnest($12::int[]) AS postponed, unnest($13::text[]) AS signal,
                         unnest($14::boolean[]) AS in_process) a) o
        ),
        updated AS (
            UPDATE courier.jobs j
            SET state = CASE WHEN o.spent OR j.attempt > 1 THEN o.state ELSE 'pending' END,
                attempt = CASE WHEN o.spent THEN j.attempt ELSE j.attempt - 1 END,
                postponements = j.postponements + o.postponed,
                run_at = CASE WHEN o.state = 'retrying'
                              THEN now() + o.delay_ms * interval '1 millisecond' ELSE j.run_at END,
                finished_at = CASE WHEN o.state IN ('succeeded', 'dead') THEN now() END,
                locked_by = NULL, locked_until = NULL, updated_at = now(),
                last_status = o.status, last_error = o.error
            FROM outcome o
            -- The state is compared as text so that no index on it can be used: the planner,
            -- whose statistics saw few running jobs, walked every running job (of every worker)
            -- as the outer side of a nested loop over the batch, 200 x 100 comparisons for one
            -- worker, 7 of a batch's 9 ms. The way in is the primary key, one probe per outcome.
            WHERE j.id = o.id AND j.state::text = 'running' AND j.attempt = o.attempt AND j.locked_by = $10
              AND NOT o.in_process
            -- The outcome's signal and place come out with its job, so the health functions
            -- below read `updated` alone: joining it to `outcome` again built a hash table of
            -- the batch for each of them (about 6,500 instructions of the server per job).
            RETURNING j.id, j.host, j.state, j.endpoint_id, j.message_id, courier.endpoint_key(j.endpoint_id, j.url) AS endpoint,
                      o.signal, o.n
        ),
        recorded AS (
            INSERT INTO courier.attempts (job_id, attempt, started_at, finished_at, duration_ms, status, error,
                                          response_excerpt, worker, in_process)
            SELECT o.id, o.attempt, o.started_at, o.finished_at,
                   o.duration_ms, o.status, o.error, o.excerpt, $10,
                   o.in_process
            FROM outcome o
            WHERE o.id IN (SELECT id FROM updated)
               OR (EXISTS (SELECT 1 FROM courier.jobs j WHERE j.id = o.id)
                   AND NOT EXISTS (SELECT 1 FROM courier.attempts a
                                   WHERE a.job_id = o.id AND a.attempt = o.attempt AND a.started_at = o.started_at))
            ORDER BY o.n
        ),
        -- Whether each health function below can have something to do, judged once per batch
        -- before either aggregates the batch: most batches are successes of busy hosts and of
        -- plain URLs that never failed, and building the functions' twelve arrays (one element
        -- per job each) only to drop them cost the server about 2,400 instructions per job,
        -- 0.7 % of a delivery (callgrind, the worker's backend over a 10,000-job drain).
        heed AS (
            SELECT
                -- A failure of the host, or a 410 at a plain URL (a registered endpoint's 410 is
                -- the endpoint's, and an answer for the host), or a host whose row the
                -- function's common case writes (a streak or an open breaker to reset,
                -- `last_success_at` older than a second; the same test as the function's). A
                -- busy host's batches of successes skip the call but once a second.
                bool_or(u.signal = 'failed' OR (u.signal = 'gone' AND u.endpoint_id IS NULL))
                    OR EXISTS (SELECT 1 FROM courier.destinations d
                               WHERE d.host = ANY (array_agg(u.host) FILTER (WHERE u.signal <> 'none'))
                                 AND (d.failure_streak > 0 OR d.opened_at IS NOT NULL OR d.last_success_at IS NULL
                                      OR d.last_success_at < now() - interval '1 second')) AS hosts,
                -- A failure or a dead job, a registered endpoint's delivery, or a plain URL
                -- whose health row has something to reset. A batch of successes to plain URLs
                -- that never failed (no health rows) skips the call, which cost the server
                -- about 6,000 instructions per job for nothing.
                bool_or(u.signal IN ('endpointFailed', 'failed', 'gone') OR u.state = 'dead'
                        OR u.endpoint_id IS NOT NULL)
                    OR EXISTS (SELECT 1 FROM courier.endpoint_health y
                               WHERE y.key = ANY (array_agg(u.endpoint))
                                 AND (y.failure_streak > 0 OR y.opened_at IS NOT NULL OR y.failing_since IS NOT NULL
                                      OR y.dead_streak > 0 OR y.endpoint_id IS NOT NULL)) AS endpoints
            FROM updated u
        ),
        -- The arrays of one aggregation are aligned with each other but not in batch order; each
        -- function reads the order from the places (`n`) that travel with them (migration
        -- 0022: an ORDER BY per aggregate sorted the batch ten times). `heed`'s answer is a
        -- one-time filter: a batch it turns away is not read again.
        signaled AS (
            SELECT courier.record_destination_outcomes(
                       array_agg(u.host), array_agg(s.host),
                       array_agg(CASE WHEN u.signal = 'gone'
                                      THEN 'the receiver answered 410 Gone to job ' || u.id END),
                       array_agg(u.n)) AS done
            FROM updated u
            -- What the host is told: an endpoint's own failure, and a registered endpoint's 410
            -- (which disables the endpoint), say the host answered.
            CROSS JOIN LATERAL (
                SELECT CASE WHEN u.signal = 'endpointFailed' THEN 'answered'
                            WHEN u.signal = 'gone' AND u.endpoint_id IS NOT NULL THEN 'answered'
                            ELSE u.signal END AS host
            ) s
            WHERE u.signal <> 'none' AND (SELECT h.hosts FROM heed h)
            HAVING count(*) > 0
        ),
        judged AS (
            SELECT courier.record_endpoint_outcomes(
                       array_agg(u.endpoint), array_agg(u.host), array_agg(u.endpoint_id),
                       array_agg(u.message_id), array_agg(u.signal), array_agg(u.state::text),
                       array_agg(u.id), $15::float8 * interval '1 second', $16::int, array_agg(u.n)) AS done
            FROM updated u
            WHERE (SELECT h.endpoints FROM heed h)
            HAVING count(*) > 0
        )
        SELECT u.id FROM updated u, (SELECT count(*) FROM signaled) s, (SELECT count(*) FROM judged) e
        """, planning: .prepared) {
            outcomeArguments($0.records, workerID: $0.workerID)
                + [$0.endpointDisable.window.inSeconds, $0.endpointDisable.deadInARow]
        }

    /// `completeBatch`'s parallel arrays: one element per row, the outcome of each attempt
    /// preceded by the requests repeated in process within it (history rows only, `$14`).
    static func outcomeArguments(_ records: [AttemptRecord], workerID: String) -> [any PostgresEncodable] {
        var ids: [Int64] = [], attempts: [Int32] = [], states: [String] = [], delays: [Double?] = []
        var statuses: [Int32?] = [], errors: [String?] = [], started: [Int64] = [], finished: [Int64] = []
        var excerpts: [String?] = [], spent: [Bool] = [], postponed: [Int32] = [], signals: [String] = []
        var inProcess: [Bool] = []
        for record in records {
            let delivery = record.delivery
            for earlier in delivery.inProcess {
                ids.append(record.jobID)
                attempts.append(Int32(clamping: record.attempt))
                states.append(record.transition.state.rawValue)
                delays.append(nil)
                statuses.append(earlier.status.map { Int32(clamping: $0) })
                errors.append(earlier.error)
                spent.append(true)
                postponed.append(0)
                signals.append(DeliveryPolicy.DestinationSignal.none.rawValue)
                started.append(PostgresTimestamp.microseconds(since1970: earlier.startedAt))
                finished.append(PostgresTimestamp.microseconds(since1970: earlier.finishedAt))
                excerpts.append(earlier.responseExcerpt)
                inProcess.append(true)
            }
            inProcess.append(false)
            ids.append(record.jobID)
            attempts.append(Int32(clamping: record.attempt))
            states.append(record.transition.state.rawValue)
            switch record.transition {
            case .retry(let delay), .postpone(let delay): delays.append(delay.inSeconds * 1000)
            case .park: delays.append(0)
            case .succeed, .dead: delays.append(nil)
            }
            statuses.append(delivery.status.map { Int32(clamping: $0) })
            switch record.transition {
            case .dead(let reason), .park(let reason): errors.append(reason)
            default: errors.append(delivery.error)
            }
            spent.append(record.transition.spendsAttempt)
            if case .postpone = record.transition { postponed.append(1) } else { postponed.append(0) }
            signals.append(record.signal.rawValue)
            started.append(PostgresTimestamp.microseconds(since1970: record.startedAt))
            finished.append(PostgresTimestamp.microseconds(since1970: record.finishedAt))
            excerpts.append(delivery.responseExcerpt)
        }
        // Numbers and flags go in binary (no text for the server to parse); the texts and the
        // enum states as array literals.
        return [
            PostgresBinaryArray(ids), PostgresBinaryArray(attempts),
            PostgresArray(states), PostgresBinaryArray(delays),
            PostgresBinaryArray(statuses), PostgresArray(errors),
            PostgresBinaryArray(started), PostgresBinaryArray(finished),
            PostgresArray(excerpts), workerID, PostgresBinaryArray(spent),
            PostgresBinaryArray(postponed),
            PostgresArray(signals), PostgresBinaryArray(inProcess),
        ]
    }

    /// Extends the leases of jobs worker `$2` still holds (`$1` ids) by `$3` ms: the heartbeat.
    /// Returns the ids still held; a missing id was rescued meanwhile. The state is compared as
    /// text, as in `completeBatch`: the jobs are found by their primary key, never by walking
    /// every running job.
    public static let heartbeat = Statement<(ids: [Int64], workerID: String, lease: Duration)>("""
        UPDATE courier.jobs
        SET locked_until = now() + $3::bigint * interval '1 millisecond'
        WHERE id = ANY ($1::bigint[]) AND state::text = 'running' AND locked_by = $2
        RETURNING id
        """, planning: .prepared) { [PostgresArray($0.ids), $0.workerID, $0.lease.inMilliseconds] }

    /// Gives claimed jobs back without an attempt having happened (`$1` ids, `$2` attempts,
    /// worker `$3`): at shutdown, or when a job's destination is at its in-flight cap. The
    /// attempt is uncounted and the job is due again after `$4` ms. (The state is compared as
    /// text, as in `completeBatch`, so the jobs are found by their primary key.)
    public static let release = Statement<(jobs: [(id: Int64, attempt: Int)], workerID: String, delay: Duration)>("""
        UPDATE courier.jobs j
        SET state = CASE WHEN j.attempt > 1 THEN 'retrying'::courier.job_state ELSE 'pending' END,
            attempt = j.attempt - 1, locked_by = NULL, locked_until = NULL,
            run_at = now() + $4::bigint * interval '1 millisecond', updated_at = now()
        FROM unnest($1::bigint[], $2::int[]) AS r(id, attempt)
        WHERE j.id = r.id AND j.state::text = 'running' AND j.attempt = r.attempt AND j.locked_by = $3
        RETURNING j.id
        """, planning: .prepared) { release in
        [
            PostgresArray(release.jobs.map(\.id)), PostgresArray(release.jobs.map(\.attempt)), release.workerID,
            release.delay.inMilliseconds,
        ]
    }

    /// Takes the maintenance lock for this session if no other worker has it: one maintenance
    /// pass at a time across the fleet. A session lock (not a transaction one) because a pass
    /// runs many short transactions; `maintenanceUnlock` releases it, and a lost connection
    /// releases it too. Workers of migration 0004 and older took the same key per transaction,
    /// so old and new workers still exclude each other during a rolling upgrade.
    public static let tryMaintenanceLock = Statement<Void>("SELECT pg_try_advisory_lock(7236833176593199461)", planning: .prepared)

    /// Releases the lock `tryMaintenanceLock` took.
    public static let maintenanceUnlock = Statement<Void>("SELECT pg_advisory_unlock(7236833176593199461)", planning: .prepared)

    /// Folds the per-statement count changes into `courier.job_counts` (see migration 0006),
    /// so `courier.queue_stats` sums a few rows; returns the delta rows folded.
    public static let foldJobCounts = Statement<Void>("SELECT courier.fold_job_counts()", planning: .prepared)

    /// Moves stray waiting jobs into the gates of endpoints whose breaker opened, that were
    /// disabled or made ordered while the jobs ran, and jobs of gates that opened meanwhile
    /// back into the lanes (`courier.sweep_gates`, migration 0014); returns how many moved.
    /// Until then the claim leaves such strays where they are.
    public static let sweepGates = Statement<Void>("SELECT courier.sweep_gates()", planning: .prepared)

    /// Returns up to `$1` running jobs whose lease expired (their worker died or stalled) to
    /// `retrying`, due at once, or to `dead` when their attempts are exhausted. Walks
    /// `jobs_host_running_idx` (every running job: at most the fleet's concurrency) and sorts the
    /// expired ones; SKIP LOCKED so it never waits on a worker's completion.
    ///
    /// Nothing is rescued within one lease (`$2` ms) of the server's start: while the server
    /// was down no worker could extend a lease, so leases that ran out during the outage say
    /// nothing about their workers. They get one lease to reconnect and write the outcomes
    /// they hold; rescuing at once would send those jobs a second time.
    public static let rescueExpired = Statement<(limit: Int, lease: Duration)>("""
        WITH expired AS (
            SELECT id FROM courier.jobs
            WHERE state = 'running' AND locked_until < now()
              AND pg_postmaster_start_time() < now() - $2::bigint * interval '1 millisecond'
            ORDER BY locked_until
            LIMIT $1
            FOR UPDATE SKIP LOCKED
        )
        UPDATE courier.jobs j
        SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'dead'::courier.job_state ELSE 'retrying' END,
            finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
            last_error = 'lease expired: worker ' || coalesce(j.locked_by, '?') || ' stopped before recording attempt '
                         || j.attempt,
            locked_by = NULL, locked_until = NULL, run_at = now(), updated_at = now()
        FROM expired
        WHERE j.id = expired.id AND j.state = 'running'
        RETURNING j.id, j.state::text
        """, planning: .prepared) { [$0.limit, $0.lease.inMilliseconds] }

    /// Settings of each retention batch's own transaction.
    ///
    /// `enable_seqscan = off`: the batch must find its rows through `jobs_retention_idx` and
    /// delete them (and their attempt rows, by the trigger `jobs_delete_attempts`) by primary key, whatever
    /// the statistics say. Measured: after autovacuum had seen the table nearly empty, a backlog
    /// of 50,000 old jobs was deleted by sequential scans, each batch of 5,000 comparing every row
    /// with the batch's ids (about 1 s a batch instead of 0.07 s).
    ///
    /// `synchronous_commit = off`: a batch lost in a crash leaves old finished jobs that the next
    /// pass deletes again; no batch need wait for its WAL flush.
    public static let retentionSettings = Statement<Void>("SET LOCAL enable_seqscan = off; SET LOCAL synchronous_commit = off")

    /// Deletes up to `$4` finished jobs older than their queue's retention, oldest first within
    /// each queue and state, and returns how many of each state went (their attempt rows go by
    /// the trigger `jobs_delete_attempts`). `$1`, `$2`, `$3`: the default seconds to keep succeeded,
    /// cancelled and dead jobs, for queues whose `keep_*` column is NULL.
    ///
    /// Shape, and why:
    /// - `finished_groups` lists the (state, queue) pairs that have finished rows by skipping
    ///   along `jobs_retention_idx` (one probe per pair, a "loose index scan"), so neither live
    ///   rows nor the millions of kept rows are read to find them.
    /// - `doomed` takes, per pair, the rows older than that pair's cutoff from the same index,
    ///   oldest first. A queue that keeps its dead jobs for 30 days costs nothing to skip: its
    ///   range starts at the cutoff. `FOR UPDATE SKIP LOCKED`: two cleaners (or a cleaner and
    ///   a `courier purge`) never wait on each other and never delete a row twice; a dead job
    ///   requeued meanwhile is re-checked against the state and skipped.
    /// - The DELETE finds its rows by primary key (`= ANY (ARRAY(...))`), never by a join the
    ///   planner could turn into a scan of every finished row, and checks the state again, so a
    ///   waiting, running or retrying job is never removed.
    public static let deleteExpiredFinished = Statement<(defaults: RetentionDefaults, batchSize: Int)>(
        finishedGroups + """
        ,
        cutoffs AS (
            SELECT g.state, g.queue,
                   now() - CASE g.state
                               WHEN 'succeeded' THEN coalesce(q.keep_succeeded, $1::float8 * interval '1 second')
                               WHEN 'cancelled' THEN coalesce(q.keep_cancelled, $2::float8 * interval '1 second')
                               ELSE coalesce(q.keep_dead, $3::float8 * interval '1 second')
                           END AS cutoff
            FROM finished_groups g
            LEFT JOIN courier.queues q ON q.name = g.queue
        ),
        doomed AS (
            SELECT d.id
            FROM cutoffs c
            CROSS JOIN LATERAL (
                SELECT j.id FROM courier.jobs j
                WHERE j.state = c.state AND j.queue = c.queue AND j.finished_at < c.cutoff
                  AND j.finished_at IS NOT NULL
                ORDER BY j.finished_at
                LIMIT $4
                FOR UPDATE SKIP LOCKED
            ) d
            LIMIT $4
        ),
        gone AS (
            DELETE FROM courier.jobs j
            WHERE j.id = ANY (ARRAY(SELECT doomed.id FROM doomed))
              AND j.state IN ('succeeded', 'cancelled', 'dead')
            RETURNING j.state
        )
        SELECT count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'cancelled'),
               count(*) FILTER (WHERE state = 'dead')
        FROM gone
        """) {
            [$0.defaults.succeeded.inSeconds, $0.defaults.cancelled.inSeconds, $0.defaults.dead.inSeconds, $0.batchSize]
        }

    /// `finished_groups`, the (state, queue) pairs that have finished rows, found by skipping
    /// along `jobs_retention_idx` (one probe per pair, a "loose index scan"): how every statement
    /// that reads finished jobs by age starts, so that neither the live rows nor the millions of
    /// kept ones are read to find them. Migration 0016 dropped the index on `finished_at` alone.
    static let finishedGroups = """
        WITH RECURSIVE finished_groups AS (
            (SELECT j.state, j.queue FROM courier.jobs j
             WHERE j.finished_at IS NOT NULL ORDER BY j.state, j.queue LIMIT 1)
            UNION ALL
            SELECT n.state, n.queue
            FROM finished_groups g
            CROSS JOIN LATERAL (
                SELECT j.state, j.queue FROM courier.jobs j
                WHERE j.finished_at IS NOT NULL AND (j.state, j.queue) > (g.state, g.queue)
                ORDER BY j.state, j.queue LIMIT 1
            ) n
        )
        """

    /// Per queue (`$1` queues or NULL for all): how many jobs are due now and the age in seconds
    /// of the oldest. Reads only due rows through `jobs_queue_due_idx`; a worker runs it at most once
    /// per maintenance interval for its metrics.
    public static let queueDepth = Statement<[String]?>("""
        SELECT j.queue, count(*), extract(epoch FROM now() - min(j.run_at))::float8
        FROM courier.jobs j
        WHERE j.state IN ('pending', 'retrying') AND j.run_at <= now()
          AND ($1::text[] IS NULL OR j.queue = ANY ($1::text[]))
        GROUP BY j.queue
        """, planning: .prepared) { [$0.map { PostgresArray($0) }] }

    /// Destinations with an open breaker, disabled ones, requests running at all of them,
    /// disabled webhook endpoints, and endpoints with an open breaker: the worker's fleet-wide gauges (one row per host and per
    /// endpoint, and the running jobs through `jobs_host_running_idx`).
    public static let destinationHealth = Statement<Void>("""
        SELECT count(*) FILTER (WHERE opened_at IS NOT NULL), count(*) FILTER (WHERE disabled_at IS NOT NULL),
               (SELECT count(*) FROM courier.jobs WHERE state = 'running'),
               (SELECT count(*) FROM courier.endpoints WHERE disabled_at IS NOT NULL),
               (SELECT count(*) FROM courier.endpoint_health WHERE opened_at IS NOT NULL)
        FROM courier.destinations
        """, planning: .prepared)

    /// The notification channel the insert trigger and requeue statements notify on.
    public static let wakeChannel = "courier_jobs"
}
