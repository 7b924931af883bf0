-- 0005: destinations. Every job's host is a destination with a cluster-wide in-flight cap, an
-- optional rate limit, a circuit breaker and an off switch. A claim locks the destination rows
-- of the hosts it takes jobs for and then counts their running jobs, so the caps hold across
-- every worker process on every machine and a claim never takes a job it cannot start. See
-- docs/destinations.md for the model and docs/state-machine.md for the job transitions.
--
-- Adding the generated `host` column rewrites courier.jobs under an exclusive lock: on a large
-- existing table, run this migration in a quiet moment.

-- The host of a job ------------------------------------------------------------------------------

CREATE FUNCTION courier.url_host(url text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT lower(coalesce(
        (regexp_match(url, '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?(\[[^]/?#]*\]|[^:/?#]*)'))[1], ''))
$$;
COMMENT ON FUNCTION courier.url_host(text) IS
    'The host of an http(s) URL in lower case, without user info and port (IPv6 in brackets); '
    'an empty string when the URL has none.';

ALTER TABLE courier.jobs
    ADD COLUMN host text COLLATE "C" NOT NULL GENERATED ALWAYS AS (courier.url_host(url)) STORED;
COMMENT ON COLUMN courier.jobs.host IS 'The destination: the URL''s host (courier.url_host), kept by PostgreSQL.';

CREATE INDEX jobs_host_due_idx ON courier.jobs (host, priority, run_at, id) WHERE state IN ('pending', 'retrying');
COMMENT ON INDEX courier.jobs_host_due_idx IS
    'Waiting jobs per destination in claim order: the claim skips from host to host and takes each host''s first.';
CREATE INDEX jobs_host_running_idx ON courier.jobs (host) WHERE state = 'running';
COMMENT ON INDEX courier.jobs_host_running_idx IS
    'Running jobs per destination: the claim counts them under the destination''s lock.';

ALTER TABLE courier.jobs ADD COLUMN postponements integer NOT NULL DEFAULT 0;
ALTER TABLE courier.jobs ADD CONSTRAINT jobs_postponements_nonnegative CHECK (postponements >= 0);
COMMENT ON COLUMN courier.jobs.postponements IS
    'Times the receiver answered 429 or 503 with Retry-After and the job was rescheduled without spending '
    'an attempt; past the worker''s cap such an answer spends one.';

-- Destinations -----------------------------------------------------------------------------------

CREATE TABLE courier.destinations (
    host              text COLLATE "C" PRIMARY KEY,
    max_in_flight     integer,
    rate_limit        double precision,
    breaker_threshold integer NOT NULL DEFAULT 10,
    breaker_cooldown  interval NOT NULL DEFAULT interval '30 seconds',
    disable_on_gone   boolean NOT NULL DEFAULT true,
    disabled_at       timestamptz,
    disabled_reason   text,
    failure_streak    integer NOT NULL DEFAULT 0,
    opened_at         timestamptz,
    probe_at          timestamptz,
    tokens            double precision NOT NULL DEFAULT 0,
    tokens_at         timestamptz,
    last_success_at   timestamptz,
    last_failure_at   timestamptz,
    claimed_at        timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT destinations_max_in_flight_valid CHECK (max_in_flight IS NULL OR max_in_flight BETWEEN 1 AND 100000),
    CONSTRAINT destinations_rate_limit_valid CHECK (rate_limit IS NULL OR (rate_limit > 0 AND rate_limit <= 1000000)),
    CONSTRAINT destinations_breaker_threshold_valid CHECK (breaker_threshold BETWEEN 1 AND 100000),
    CONSTRAINT destinations_breaker_cooldown_valid
        CHECK (breaker_cooldown >= interval '1 second' AND breaker_cooldown <= interval '1 day'),
    CONSTRAINT destinations_disabled_has_reason CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL)),
    CONSTRAINT destinations_failure_streak_nonnegative CHECK (failure_streak >= 0),
    CONSTRAINT destinations_open_has_probe CHECK ((opened_at IS NULL) = (probe_at IS NULL))
) WITH (
    -- Claims and outcomes rewrite these rows all day: room for HOT updates on every page.
    fillfactor = 50
);
COMMENT ON TABLE courier.destinations IS
    'One row per destination host a claim has seen: its settings (NULL = the default) and its live state. '
    'Rows are created by the claim; an operator may insert one to set a cap before the first job.';
COMMENT ON COLUMN courier.destinations.host IS 'The host, as courier.url_host gives it (lower case, no port).';
COMMENT ON COLUMN courier.destinations.max_in_flight IS
    'Most requests in flight to this host across all workers; NULL: the worker''s --per-host-limit.';
COMMENT ON COLUMN courier.destinations.rate_limit IS
    'Most requests started per second across all workers (a token bucket of one second''s burst); NULL: no limit.';
COMMENT ON COLUMN courier.destinations.breaker_threshold IS 'Consecutive failures that open the circuit breaker.';
COMMENT ON COLUMN courier.destinations.breaker_cooldown IS 'How long an open breaker waits before one probe request.';
COMMENT ON COLUMN courier.destinations.disable_on_gone IS
    'true: a 410 Gone disables the host and parks the job; false (a host shared by many receivers): the '
    'job goes dead and the host carries on.';
COMMENT ON COLUMN courier.destinations.disabled_at IS
    'When set, no job of this host is claimed: its jobs wait, parked, until `courier hosts enable`.';
COMMENT ON COLUMN courier.destinations.disabled_reason IS 'Why: an operator''s note or the receiver''s 410 Gone.';
COMMENT ON COLUMN courier.destinations.failure_streak IS 'Consecutive failed attempts (5xx, timeouts, connection errors).';
COMMENT ON COLUMN courier.destinations.opened_at IS 'When the breaker opened; NULL while it is closed.';
COMMENT ON COLUMN courier.destinations.probe_at IS
    'While open: when the next probe request may start (each claimed probe moves it one cool-down on).';
COMMENT ON COLUMN courier.destinations.tokens IS 'Rate limit bucket: requests that could start at tokens_at.';
COMMENT ON COLUMN courier.destinations.tokens_at IS 'When tokens was computed.';
COMMENT ON COLUMN courier.destinations.last_success_at IS
    'When an attempt last got an answer (kept to the second: busy hosts are not rewritten on every batch).';
COMMENT ON COLUMN courier.destinations.last_failure_at IS 'When an attempt last failed.';
COMMENT ON COLUMN courier.destinations.claimed_at IS 'When a claim last took (or considered) jobs of this host.';
COMMENT ON COLUMN courier.destinations.created_at IS 'When the row was created.';
COMMENT ON COLUMN courier.destinations.updated_at IS 'When a setting or the live state last changed.';

-- Requests that may start now under the rate limit (a bucket of one second's burst, at least 1).
CREATE FUNCTION courier.destination_tokens(rate_limit double precision, tokens double precision,
                                           tokens_at timestamptz) RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN rate_limit IS NULL THEN 'Infinity'::float8
        WHEN tokens_at IS NULL THEN greatest(rate_limit, 1)
        ELSE least(greatest(rate_limit, 1),
                   tokens + rate_limit * greatest(extract(epoch FROM now() - tokens_at)::float8, 0))
    END
$$;
COMMENT ON FUNCTION courier.destination_tokens(double precision, double precision, timestamptz) IS
    'Requests a destination''s rate limit lets start now: Infinity without a limit.';

-- Outcomes: failure streaks, the circuit breaker and 410 Gone ----------------------------------

CREATE FUNCTION courier.record_destination_outcomes(outcome_hosts text[], signals text[], reasons text[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF outcome_hosts IS NULL THEN
        RETURN;
    END IF;
    IF NOT ('failed' = ANY (signals) OR 'gone' = ANY (signals)) THEN
        -- The common case: every receiver answered. Write only the rows that change (a streak or
        -- an open breaker to reset, last_success_at older than a second), so a busy host's row
        -- is not locked and rewritten by every batch. Locks are taken in host order, the order
        -- claims take them in, so two writers never wait for each other in a cycle.
        PERFORM 1 FROM courier.destinations d
        WHERE d.host = ANY (outcome_hosts)
          AND (d.failure_streak > 0 OR d.opened_at IS NOT NULL OR d.last_success_at IS NULL
               OR d.last_success_at < now() - interval '1 second')
        ORDER BY d.host FOR UPDATE;
        UPDATE courier.destinations d
        SET failure_streak = 0, opened_at = NULL, probe_at = NULL, last_success_at = now(), updated_at = now()
        WHERE d.host = ANY (outcome_hosts)
          AND (d.failure_streak > 0 OR d.opened_at IS NOT NULL OR d.last_success_at IS NULL
               OR d.last_success_at < now() - interval '1 second');
        RETURN;
    END IF;
    PERFORM 1 FROM courier.destinations d WHERE d.host = ANY (outcome_hosts) ORDER BY d.host FOR UPDATE;
    UPDATE courier.destinations d
    SET failure_streak = c.streak,
        -- A failure after the batch's last answer (re)opens the breaker for one cool-down when
        -- the streak reaches the threshold or the breaker was open (a failed probe); an answer
        -- with no failure after it closes it (the probe came back).
        opened_at = CASE WHEN c.trips THEN CASE WHEN c.last_ok IS NULL THEN coalesce(d.opened_at, now()) ELSE now() END
                         WHEN c.last_ok IS NOT NULL THEN NULL
                         ELSE d.opened_at END,
        probe_at = CASE WHEN c.trips THEN now() + d.breaker_cooldown
                        WHEN c.last_ok IS NOT NULL THEN NULL
                        ELSE d.probe_at END,
        disabled_at = CASE WHEN c.gone IS NOT NULL AND d.disable_on_gone AND d.disabled_at IS NULL THEN now()
                           ELSE d.disabled_at END,
        disabled_reason = CASE WHEN c.gone IS NOT NULL AND d.disable_on_gone AND d.disabled_at IS NULL THEN c.gone
                               ELSE d.disabled_reason END,
        last_success_at = CASE WHEN c.last_ok IS NOT NULL THEN now() ELSE d.last_success_at END,
        last_failure_at = CASE WHEN c.failures > 0 THEN now() ELSE d.last_failure_at END,
        updated_at = now()
    FROM (
        SELECT s.*, k.streak,
               s.failures_after_ok > 0 AND (x.opened_at IS NOT NULL OR k.streak >= x.breaker_threshold) AS trips
        FROM (
            SELECT o.host,
                   count(*) FILTER (WHERE o.signal = 'failed') AS failures,
                   max(o.n) FILTER (WHERE o.signal = 'answered') AS last_ok,
                   count(*) FILTER (WHERE o.signal = 'failed' AND o.n > coalesce(o.host_last_ok, 0)) AS failures_after_ok,
                   (array_agg(o.reason ORDER BY o.n) FILTER (WHERE o.signal = 'gone'))[1] AS gone
            FROM (
                SELECT u.*, max(u.n) FILTER (WHERE u.signal = 'answered') OVER (PARTITION BY u.host) AS host_last_ok
                FROM unnest(outcome_hosts, signals, reasons) WITH ORDINALITY AS u(host, signal, reason, n)
            ) o
            GROUP BY o.host
        ) s
        JOIN courier.destinations x ON x.host = s.host
        CROSS JOIN LATERAL (
            SELECT CASE WHEN s.last_ok IS NULL THEN x.failure_streak + s.failures ELSE s.failures_after_ok END AS streak
        ) k
    ) c
    WHERE d.host = c.host;
END;
$$;
COMMENT ON FUNCTION courier.record_destination_outcomes(text[], text[], text[]) IS
    'Applies a batch of attempt outcomes, in order, to their destinations: signal answered resets the failure '
    'streak and closes the breaker; failed counts towards breaker_threshold and (re)opens it; gone (410) '
    'disables the destination with the reason unless disable_on_gone is false.';

-- Roles ------------------------------------------------------------------------------------------

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'courier_worker') THEN
        GRANT SELECT, INSERT, UPDATE ON courier.destinations TO courier_worker;
        GRANT UPDATE (postponements) ON courier.jobs TO courier_worker;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'courier_operator') THEN
        GRANT SELECT, INSERT, UPDATE, DELETE ON courier.destinations TO courier_operator;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'courier_producer') THEN
        GRANT SELECT ON courier.destinations TO courier_producer;
    END IF;
END;
$$;
