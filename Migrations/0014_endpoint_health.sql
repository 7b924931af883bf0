-- 0014: endpoint health — one bad endpoint never holds back another — and ordered endpoints.
--
-- Until now a host's breaker judged everything its receivers did. One path of a shared host
-- that hung opened the whole host's breaker, and the half-open probe took the host's oldest due
-- job, which was again a hanging one: the host's healthy paths waited for as long as it hung.
--
--   1. An endpoint is a registered webhook endpoint, or for any other job its URL without the
--      query (courier.endpoint_key). courier.endpoint_health holds each one's failure streak,
--      breaker, dead streak and failing window. The host's breaker now counts only what is the
--      host's fault (refused, reset, connect timeouts, DNS); what one endpoint does wrong (its
--      5xx, a timeout after the request went out) counts against that endpoint alone.
--   2. A gate. The waiting jobs of an endpoint whose breaker is open, that is disabled, or that
--      is ordered carry its key in courier.jobs.gate and leave the host's claim lanes
--      (jobs_lane_due_idx holds only jobs with no gate), so no claim walks past them. The claim
--      takes from a gate only its head: the half-open probe (one per cool-down), or an ordered
--      endpoint's oldest delivery when none of its deliveries is running. A probe is therefore
--      never the job of another endpoint that is failing.
--   3. A registered endpoint that failed every delivery for a window (default 5 days) or had N
--      deliveries in a row go dead (default 100) is disabled with the reason; a 410 Gone from a
--      registered endpoint disables that endpoint, not its host. Every disable publishes the
--      operational event courier.endpoint.disabled, and a message whose every delivery died
--      publishes courier.message.failed, through courier.publish to the internal endpoints
--      (tenant NULL) subscribed to them.
--
-- Rebuilding jobs_lane_due_idx reads the waiting jobs once (seconds for a million); workers and
-- producers wait meanwhile. The new column has no default: no rewrite of courier.jobs.

-- The endpoint of a job --------------------------------------------------------------------------

-- Every function in the body is immutable (bigint::text, not text || bigint, which is only
-- stable), so PostgreSQL inlines it: as a function call it cost about 4 us per outcome.
CREATE FUNCTION courier.endpoint_key(endpoint_id bigint, url text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN endpoint_id IS NOT NULL THEN 'endpoint:' || endpoint_id::text
                ELSE split_part(split_part(url, '#', 1), '?', 1) END
$$;
COMMENT ON FUNCTION courier.endpoint_key(bigint, text) IS
    'The endpoint a job is judged by: endpoint:<id> for a webhook delivery, else the URL without its query and fragment.';

ALTER TABLE courier.jobs ADD COLUMN gate text COLLATE "C";
COMMENT ON COLUMN courier.jobs.gate IS
    'NULL: claimed through its host''s lanes. Else the key of its endpoint (courier.endpoint_health), whose breaker is '
    'open, which is disabled or which is ordered: the claim takes only that gate''s head.';

DROP INDEX courier.jobs_lane_due_idx;
CREATE INDEX jobs_lane_due_idx ON courier.jobs (host, queue, priority, run_at, id)
    WHERE state IN ('pending', 'retrying') AND gate IS NULL;
COMMENT ON INDEX courier.jobs_lane_due_idx IS
    'Serves the claim: the (host, queue) pairs with waiting jobs, and each pair''s due jobs in claim order; gated jobs are not in it.';
CREATE INDEX jobs_gate_idx ON courier.jobs (gate, id)
    WHERE gate IS NOT NULL AND state IN ('pending', 'retrying', 'running');
COMMENT ON INDEX courier.jobs_gate_idx IS 'Each gate''s jobs in publish (id) order: its head, and its release.';
CREATE INDEX jobs_gate_running_idx ON courier.jobs (gate) WHERE gate IS NOT NULL AND state = 'running';
COMMENT ON INDEX courier.jobs_gate_running_idx IS 'Whether an ordered endpoint has a delivery running.';

-- Endpoint settings ---------------------------------------------------------------------------

ALTER TABLE courier.endpoints
    ADD COLUMN disable_after interval,
    ADD COLUMN disable_after_dead integer,
    ADD CONSTRAINT endpoints_disable_after_valid CHECK (disable_after IS NULL OR disable_after >= interval '0'),
    ADD CONSTRAINT endpoints_disable_after_dead_valid CHECK (disable_after_dead IS NULL OR disable_after_dead >= 0);
COMMENT ON COLUMN courier.endpoints.disable_after IS
    'Disable the endpoint when every delivery failed for this long; 0: never; NULL: the worker''s --endpoint-disable-after.';
COMMENT ON COLUMN courier.endpoints.disable_after_dead IS
    'Disable the endpoint after this many deliveries in a row went dead; 0: never; NULL: the worker''s --endpoint-disable-dead.';

-- Health -----------------------------------------------------------------------------------------

CREATE TABLE courier.endpoint_health (
    key             text COLLATE "C" PRIMARY KEY,
    host            text COLLATE "C" NOT NULL,
    endpoint_id     bigint UNIQUE REFERENCES courier.endpoints (id) ON DELETE CASCADE,
    ordered         boolean NOT NULL DEFAULT false,
    disabled        boolean NOT NULL DEFAULT false,
    failure_streak  integer NOT NULL DEFAULT 0,
    opened_at       timestamptz,
    probe_at        timestamptz,
    failing_since   timestamptz,
    dead_streak     integer NOT NULL DEFAULT 0,
    last_success_at timestamptz,
    last_failure_at timestamptz,
    gate_changed_at timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT endpoint_health_open_has_probe CHECK ((opened_at IS NULL) = (probe_at IS NULL)),
    CONSTRAINT endpoint_health_streaks_nonnegative CHECK (failure_streak >= 0 AND dead_streak >= 0)
) WITH (
    -- Outcomes and probes rewrite these rows: room for HOT updates.
    fillfactor = 50
);
COMMENT ON TABLE courier.endpoint_health IS
    'One row per registered endpoint, and per plain-job endpoint (URL without query) once it failed: its breaker and '
    'streaks. The breaker settings are its host''s (courier.destinations).';
COMMENT ON COLUMN courier.endpoint_health.key IS 'courier.endpoint_key: endpoint:<id>, or the URL without query.';
COMMENT ON COLUMN courier.endpoint_health.host IS 'The host of the endpoint''s URL (courier.url_host).';
COMMENT ON COLUMN courier.endpoint_health.endpoint_id IS 'The registered endpoint, or NULL for a plain-job URL.';
COMMENT ON COLUMN courier.endpoint_health.ordered IS 'Copied from courier.endpoints.ordered.';
COMMENT ON COLUMN courier.endpoint_health.disabled IS 'Copied from courier.endpoints: disabled_at is set.';
COMMENT ON COLUMN courier.endpoint_health.failure_streak IS 'Consecutive failures that were the endpoint''s (5xx, timeouts after sending).';
COMMENT ON COLUMN courier.endpoint_health.opened_at IS 'When its breaker opened; NULL while closed.';
COMMENT ON COLUMN courier.endpoint_health.probe_at IS 'While open: when the next probe may start.';
COMMENT ON COLUMN courier.endpoint_health.failing_since IS 'The first failed attempt since the last success; NULL after a success.';
COMMENT ON COLUMN courier.endpoint_health.dead_streak IS 'Deliveries that went dead since the last success.';
COMMENT ON COLUMN courier.endpoint_health.last_success_at IS 'When a delivery last succeeded (kept to the minute).';
COMMENT ON COLUMN courier.endpoint_health.last_failure_at IS 'When an attempt last failed.';
COMMENT ON COLUMN courier.endpoint_health.gate_changed_at IS
    'When its gate last opened or closed: maintenance sweeps stray jobs of gates that changed lately.';
COMMENT ON COLUMN courier.endpoint_health.updated_at IS 'When the row last changed.';
COMMENT ON INDEX courier.endpoint_health_endpoint_id_key IS 'A registered endpoint has one health row.';
CREATE INDEX endpoint_health_gated_idx ON courier.endpoint_health (host) WHERE opened_at IS NOT NULL OR disabled;
COMMENT ON INDEX courier.endpoint_health_gated_idx IS
    'Serves the claim: whether a host has an endpoint whose stray waiting jobs must be left in the lanes.';
CREATE INDEX endpoint_health_heads_idx ON courier.endpoint_health (key) WHERE (opened_at IS NOT NULL OR ordered) AND NOT disabled;
COMMENT ON INDEX courier.endpoint_health_heads_idx IS 'Serves the claim: the gates that may give a job (probe or ordered head).';

-- Gates ------------------------------------------------------------------------------------------

-- Whether an endpoint's jobs wait in its gate.
CREATE FUNCTION courier.gate_closed(opened_at timestamptz, disabled boolean, ordered boolean) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT opened_at IS NOT NULL OR disabled OR ordered
$$;
COMMENT ON FUNCTION courier.gate_closed(timestamptz, boolean, boolean) IS
    'True when an endpoint''s waiting jobs belong in its gate: breaker open, disabled, or ordered.';

CREATE FUNCTION courier.close_gate(gate_key text, hosts text[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    moved integer;
BEGIN
    -- The host's waiting jobs through jobs_lane_due_idx (one walk of that host's backlog).
    UPDATE courier.jobs j SET gate = gate_key
    WHERE j.host = ANY (hosts) AND j.state IN ('pending', 'retrying') AND j.gate IS NULL
      AND courier.endpoint_key(j.endpoint_id, j.url) = gate_key;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
END;
$$;
COMMENT ON FUNCTION courier.close_gate(text, text[]) IS
    'Moves the waiting jobs of endpoint gate_key at these hosts out of the claim lanes into its gate; returns how many.';

CREATE FUNCTION courier.open_gate(gate_key text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    moved integer;
BEGIN
    UPDATE courier.jobs j SET gate = NULL
    WHERE j.gate = gate_key AND j.state IN ('pending', 'retrying');
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
END;
$$;
COMMENT ON FUNCTION courier.open_gate(text) IS 'Puts the waiting jobs of gate gate_key back in the claim lanes; returns how many.';

-- Registered endpoints: their health row follows their settings ---------------------------------

CREATE FUNCTION courier.endpoint_follow() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    h courier.endpoint_health;
    old_host text;
BEGIN
    SELECT * INTO h FROM courier.endpoint_health WHERE key = 'endpoint:' || NEW.id FOR UPDATE;
    old_host := h.host;
    INSERT INTO courier.endpoint_health AS x (key, host, endpoint_id, ordered, disabled)
    VALUES ('endpoint:' || NEW.id, courier.url_host(NEW.url), NEW.id, NEW.ordered, NEW.disabled_at IS NOT NULL)
    ON CONFLICT (key) DO UPDATE
        SET host = excluded.host, ordered = excluded.ordered, disabled = excluded.disabled, updated_at = now(),
            gate_changed_at = CASE WHEN (x.ordered, x.disabled, x.host) IS DISTINCT FROM
                                        (excluded.ordered, excluded.disabled, excluded.host)
                                   THEN now() ELSE x.gate_changed_at END
    RETURNING x.* INTO h;
    IF courier.gate_closed(h.opened_at, h.disabled, h.ordered) THEN
        PERFORM courier.close_gate(h.key, ARRAY[h.host, coalesce(old_host, h.host)]);
    ELSE
        PERFORM courier.open_gate(h.key);
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF OLD.disabled_at IS NULL AND NEW.disabled_at IS NOT NULL THEN
            PERFORM courier.publish('courier.endpoint.disabled',
            jsonb_build_object('endpoint_id', NEW.id, 'tenant', NEW.tenant, 'url', split_part(NEW.url, '?', 1),
                               'reason', NEW.disabled_reason, 'disabled_at', NEW.disabled_at),
            NULL, 'courier.endpoint.disabled:' || NEW.id || ':' || extract(epoch FROM NEW.disabled_at));
        END IF;
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION courier.endpoint_follow() IS
    'Row trigger: keeps an endpoint''s health row (host, ordered, disabled) and its gate in step with it, and publishes '
    'courier.endpoint.disabled when it is disabled.';
CREATE TRIGGER endpoint_follow AFTER INSERT OR UPDATE OF url, ordered, disabled_at ON courier.endpoints
    FOR EACH ROW EXECUTE FUNCTION courier.endpoint_follow();
COMMENT ON TRIGGER endpoint_follow ON courier.endpoints IS 'Health row, gate and the disabled event follow the endpoint.';

INSERT INTO courier.endpoint_health (key, host, endpoint_id, ordered, disabled)
SELECT 'endpoint:' || e.id, courier.url_host(e.url), e.id, e.ordered, e.disabled_at IS NOT NULL
FROM courier.endpoints e;
SELECT courier.close_gate(h.key, ARRAY[h.host]) FROM courier.endpoint_health h WHERE h.ordered OR h.disabled;

-- Outcomes ---------------------------------------------------------------------------------------

CREATE FUNCTION courier.record_endpoint_outcomes(
    keys text[], hosts text[], endpoint_ids bigint[], message_ids bigint[], signals text[], states text[],
    job_ids bigint[], default_disable_after interval, default_disable_dead integer
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    k record;
    h courier.endpoint_health;
    e courier.endpoints;
    threshold integer;
    cooldown interval;
    streak integer;
    trips boolean;
    closes boolean;
    deads integer;
    since timestamptz;
    window_length interval;
    dead_limit integer;
    reason text;
    failed_message record;
    reopened text[];
BEGIN
    IF keys IS NULL THEN
        RETURN;
    END IF;
    IF NOT ('endpointFailed' = ANY (signals) OR 'failed' = ANY (signals) OR 'gone' = ANY (signals)
            OR 'dead' = ANY (states)) THEN
        -- The common case: nothing failed. Only rows with something to reset are written (a
        -- registered endpoint's last success at most once a minute); plain-job URLs that never
        -- failed have no row at all.
        WITH old AS (
            SELECT y.key, y.opened_at IS NOT NULL AS was_open FROM courier.endpoint_health y
            WHERE y.key = ANY (ARRAY(SELECT DISTINCT u.key FROM unnest(keys, states) AS u(key, state)
                                     WHERE u.state = 'succeeded'))
              AND (y.failure_streak > 0 OR y.opened_at IS NOT NULL OR y.failing_since IS NOT NULL OR y.dead_streak > 0
                   OR (y.endpoint_id IS NOT NULL
                       AND (y.last_success_at IS NULL OR y.last_success_at < now() - interval '1 minute')))
            ORDER BY y.key FOR UPDATE
        ),
        reset AS (
            UPDATE courier.endpoint_health x
            SET failure_streak = 0, opened_at = NULL, probe_at = NULL, failing_since = NULL, dead_streak = 0,
                last_success_at = now(), updated_at = now(),
                gate_changed_at = CASE WHEN old.was_open THEN now() ELSE x.gate_changed_at END
            FROM old
            WHERE x.key = old.key
            RETURNING x.key, old.was_open AND NOT x.disabled AND NOT x.ordered AS opens
        )
        -- Breakers that closed (a probe succeeded): their gates open.
        SELECT array_agg(r.key) INTO reopened FROM reset r WHERE r.opens;
        IF reopened IS NOT NULL THEN
            PERFORM courier.open_gate(g) FROM unnest(reopened) AS g;
        END IF;
        RETURN;
    END IF;

    FOR k IN
        SELECT o.key, min(o.host) AS host, max(o.endpoint_id) AS endpoint_id,
               count(*) FILTER (WHERE o.signal = 'endpointFailed') AS failures,
               count(*) FILTER (WHERE o.signal = 'endpointFailed' AND o.n > coalesce(o.last_answer, 0)) AS failures_after_answer,
               max(o.n) FILTER (WHERE o.signal = 'answered') AS last_answer,
               max(o.n) FILTER (WHERE o.state = 'succeeded') AS last_success,
               count(*) FILTER (WHERE o.state = 'dead' AND o.n > coalesce(o.last_success, 0)) AS deads_after_success,
               coalesce(bool_or(o.signal IN ('failed', 'endpointFailed', 'gone') OR o.state = 'dead')
                            FILTER (WHERE o.n > coalesce(o.last_success, 0)), false) AS failing_after_success,
               bool_or(o.signal = 'gone') AS gone
        FROM (
            SELECT u.*, max(u.n) FILTER (WHERE u.signal = 'answered') OVER (PARTITION BY u.key) AS last_answer,
                   max(u.n) FILTER (WHERE u.state = 'succeeded') OVER (PARTITION BY u.key) AS last_success
            FROM unnest(keys, hosts, endpoint_ids, signals, states) WITH ORDINALITY
                AS u(key, host, endpoint_id, signal, state, n)
        ) o
        GROUP BY o.key
        ORDER BY o.key
    LOOP
        IF k.failures > 0 OR k.endpoint_id IS NOT NULL THEN
            -- Not for a registered endpoint deleted meanwhile: its deliveries' outcomes are
            -- written all the same.
            INSERT INTO courier.endpoint_health (key, host, endpoint_id)
            SELECT k.key, k.host, k.endpoint_id
            WHERE k.endpoint_id IS NULL OR EXISTS (SELECT 1 FROM courier.endpoints x WHERE x.id = k.endpoint_id)
            ON CONFLICT (key) DO NOTHING;
        END IF;
        SELECT * INTO h FROM courier.endpoint_health WHERE key = k.key FOR UPDATE;
        IF NOT FOUND THEN
            CONTINUE;
        END IF;
        SELECT coalesce(d.breaker_threshold, 10), coalesce(d.breaker_cooldown, interval '30 seconds')
        INTO threshold, cooldown
        FROM (SELECT 1) one LEFT JOIN courier.destinations d ON d.host = h.host;
        streak := CASE WHEN k.last_answer IS NULL THEN h.failure_streak + k.failures ELSE k.failures_after_answer END;
        trips := k.failures_after_answer > 0 AND (h.opened_at IS NOT NULL OR streak >= threshold);
        closes := NOT trips AND k.last_answer IS NOT NULL AND h.opened_at IS NOT NULL;
        deads := CASE WHEN k.last_success IS NULL THEN h.dead_streak + k.deads_after_success ELSE k.deads_after_success END;
        since := CASE WHEN k.last_success IS NULL
                      THEN coalesce(h.failing_since, CASE WHEN k.failing_after_success THEN now() END)
                      WHEN k.failing_after_success THEN now() END;
        UPDATE courier.endpoint_health
        SET failure_streak = streak,
            opened_at = CASE WHEN trips THEN CASE WHEN k.last_answer IS NULL THEN coalesce(h.opened_at, now()) ELSE now() END
                             WHEN closes THEN NULL ELSE h.opened_at END,
            probe_at = CASE WHEN trips THEN now() + cooldown WHEN closes THEN NULL ELSE h.probe_at END,
            dead_streak = deads,
            failing_since = since,
            last_success_at = CASE WHEN k.last_success IS NOT NULL THEN now() ELSE h.last_success_at END,
            last_failure_at = CASE WHEN k.failing_after_success OR k.failures > 0 THEN now() ELSE h.last_failure_at END,
            gate_changed_at = CASE WHEN (trips AND h.opened_at IS NULL) OR closes THEN now() ELSE h.gate_changed_at END,
            updated_at = now()
        WHERE key = h.key;
        IF trips THEN
            -- Waiting jobs of this endpoint leave the lanes (those of this batch are swept by
            -- the next maintenance pass: the claim skips them meanwhile).
            UPDATE courier.jobs j SET gate = h.key
            WHERE j.host = h.host AND j.state IN ('pending', 'retrying') AND j.gate IS NULL
              AND courier.endpoint_key(j.endpoint_id, j.url) = h.key AND j.id <> ALL (job_ids);
        ELSIF closes AND NOT (h.disabled OR h.ordered) THEN
            UPDATE courier.jobs j SET gate = NULL
            WHERE j.gate = h.key AND j.state IN ('pending', 'retrying') AND j.id <> ALL (job_ids);
        END IF;
        IF h.endpoint_id IS NOT NULL AND NOT h.disabled THEN
            SELECT * INTO e FROM courier.endpoints WHERE id = h.endpoint_id;
            window_length := coalesce(e.disable_after, default_disable_after);
            dead_limit := coalesce(e.disable_after_dead, default_disable_dead);
            reason := CASE
                WHEN k.gone THEN 'the receiver answered 410 Gone'
                WHEN window_length > interval '0' AND since IS NOT NULL AND since <= now() - window_length THEN
                    'every delivery failed for ' || justify_interval(now() - since) || ' (since '
                    || to_char(since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC)'
                WHEN dead_limit > 0 AND deads >= dead_limit THEN deads || ' deliveries in a row went dead'
            END;
            IF reason IS NOT NULL AND e.id IS NOT NULL THEN
                UPDATE courier.endpoints SET disabled_at = now(), disabled_reason = reason
                WHERE id = e.id AND disabled_at IS NULL;
            END IF;
        END IF;
    END LOOP;

    -- Messages whose every delivery is now dead (their jobs in this batch are dead by `states`).
    FOR failed_message IN
        SELECT m.id, m.event_type, m.tenant, m.endpoints
        FROM courier.messages m
        WHERE m.id = ANY (ARRAY(SELECT DISTINCT u.message_id FROM unnest(message_ids, states) AS u(message_id, state)
                                WHERE u.message_id IS NOT NULL AND u.state = 'dead'))
          AND m.event_type NOT LIKE 'courier.%'
          AND NOT EXISTS (SELECT 1 FROM unnest(message_ids, states) AS b(message_id, state)
                          WHERE b.message_id = m.id AND b.state <> 'dead')
          AND NOT EXISTS (SELECT 1 FROM courier.deliveries l JOIN courier.jobs j ON j.id = l.job_id
                          WHERE l.message_id = m.id AND j.state <> 'dead' AND j.id <> ALL (job_ids))
        ORDER BY m.id
    LOOP
        PERFORM courier.publish('courier.message.failed',
            jsonb_build_object('message_id', failed_message.id, 'event_type', failed_message.event_type,
                               'tenant', failed_message.tenant, 'endpoints', failed_message.endpoints),
            NULL, 'courier.message.failed:' || failed_message.id);
    END LOOP;
END;
$$;
COMMENT ON FUNCTION courier.record_endpoint_outcomes(text[], text[], bigint[], bigint[], text[], text[], bigint[], interval, integer) IS
    'Applies a batch of outcomes, in order, to their endpoints: endpointFailed counts towards the breaker (the host''s '
    'threshold and cool-down), answered closes it; dead deliveries and failed attempts feed the auto-disable of '
    'registered endpoints; a message whose every delivery died publishes courier.message.failed.';

-- Maintenance ------------------------------------------------------------------------------------

CREATE FUNCTION courier.sweep_gates() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    moved integer;
BEGIN
    -- Only endpoints whose state changed lately: stray jobs are those that were running when
    -- it changed, and they come back within a lease.
    SELECT coalesce(sum(CASE WHEN courier.gate_closed(h.opened_at, h.disabled, h.ordered)
                             THEN courier.close_gate(h.key, ARRAY[h.host]) ELSE courier.open_gate(h.key) END), 0)
    INTO moved
    FROM courier.endpoint_health h
    WHERE h.gate_changed_at > now() - interval '15 minutes';
    -- Gates whose endpoint is gone (a delivery that was running when its endpoint was deleted
    -- came back to wait): open, as before gates existed. One probe per gate, by a skip scan of
    -- jobs_gate_idx.
    WITH RECURSIVE gates AS (
        (SELECT j.gate FROM courier.jobs j
         WHERE j.gate IS NOT NULL AND j.state IN ('pending', 'retrying', 'running') ORDER BY j.gate LIMIT 1)
        UNION ALL
        SELECT (SELECT j.gate FROM courier.jobs j
                WHERE j.gate > g.gate AND j.state IN ('pending', 'retrying', 'running') ORDER BY j.gate LIMIT 1)
        FROM gates g
        WHERE g.gate IS NOT NULL
    )
    SELECT moved + coalesce(sum(courier.open_gate(g.gate)), 0) INTO moved
    FROM gates g
    WHERE g.gate IS NOT NULL AND NOT EXISTS (SELECT 1 FROM courier.endpoint_health h WHERE h.key = g.gate);
    RETURN moved;
END;
$$;
COMMENT ON FUNCTION courier.sweep_gates() IS
    'Maintenance: moves stray waiting jobs of closed gates out of the lanes, and jobs of opened gates back; returns how many.';

-- Publish: deliveries to an ordered endpoint, or one whose breaker is open, start in its gate ----

CREATE OR REPLACE FUNCTION courier.publish(
    event_type text, payload jsonb, tenant text DEFAULT NULL, idempotency_key text DEFAULT NULL,
    traceparent text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    problem text;
    published bigint;
    published_at timestamptz := now();
    matched integer;
    keys text[];
    body bytea;
    trace_context text := courier.current_traceparent(publish.traceparent);
BEGIN
    problem := coalesce(
        courier.event_type_problem(publish.event_type),
        CASE WHEN publish.payload IS NULL THEN 'payload is required (a JSON value; ''{}'' for none)' END,
        courier.tenant_problem(publish.tenant),
        CASE WHEN publish.idempotency_key IS NOT NULL
                  AND (publish.idempotency_key = '' OR length(publish.idempotency_key) > 255)
             THEN 'idempotency_key must be 1-255 characters when given' END,
        courier.traceparent_problem(trace_context));
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION '%', problem USING ERRCODE = '22023';
    END IF;
    -- Built once for every endpoint; the jobs' trigger checks its size (at most 1 MiB).
    body := courier.message_body(publish.event_type, published_at, publish.payload);
    IF octet_length(body) > 1048576 THEN
        RAISE EXCEPTION 'payload must be at most 1 MiB with its envelope, got % bytes', octet_length(body)
            USING ERRCODE = '22023';
    END IF;
    keys := courier.event_type_keys(publish.event_type);
    IF publish.idempotency_key IS NULL THEN
        -- The usual case: the deliveries first, under the message id taken ahead, then the
        -- message with their count, so endpoints are matched once.
        published := nextval('courier.messages_id_seq');
    ELSE
        -- With a key the message comes first: a repeated key (or a concurrent publish of it,
        -- which waits here for the first one's commit) must find nothing written to undo.
        SELECT count(*) INTO matched FROM courier.endpoints e
        WHERE coalesce(e.tenant, '') = coalesce(publish.tenant, '') AND e.disabled_at IS NULL
          AND e.event_types && keys AND (e.payload_filter IS NULL OR publish.payload @> e.payload_filter);
        INSERT INTO courier.messages AS m (event_type, tenant, payload, idempotency_key, endpoints, created_at)
        VALUES (publish.event_type, publish.tenant, publish.payload, publish.idempotency_key, matched, published_at)
        ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING m.id INTO published;
        IF published IS NULL THEN
            SELECT m.id INTO published FROM courier.messages m
            WHERE m.tenant IS NOT DISTINCT FROM publish.tenant AND m.idempotency_key = publish.idempotency_key;
            RETURN published;
        END IF;
    END IF;
    -- One delivery per matching endpoint (a probe of endpoints_tenant_idx and one array overlap
    -- per endpoint of the tenant), and its link. A delivery to an ordered endpoint, or to one
    -- whose breaker is open, starts in the endpoint's gate (one probe of endpoint_health).
    WITH written AS (
        INSERT INTO courier.jobs (queue, method, url, headers, body, max_attempts, run_at, message_id, endpoint_id,
                                  traceparent, gate)
        SELECT e.queue, 'POST', e.url, courier.message_headers(published, e.headers), body, coalesce(q.max_attempts, 10),
               CASE WHEN e.rate_limit IS NULL THEN now() ELSE courier.endpoint_slot(e.id, e.rate_limit) END,
               published, e.id, trace_context,
               CASE WHEN e.ordered OR h.opened_at IS NOT NULL THEN 'endpoint:' || e.id END
        FROM courier.endpoints e
        LEFT JOIN courier.queues q ON q.name = e.queue
        LEFT JOIN courier.endpoint_health h ON h.key = 'endpoint:' || e.id
        WHERE coalesce(e.tenant, '') = coalesce(publish.tenant, '') AND e.disabled_at IS NULL
          AND e.event_types && keys AND (e.payload_filter IS NULL OR publish.payload @> e.payload_filter)
        RETURNING id, endpoint_id
    )
    INSERT INTO courier.deliveries (message_id, job_id, endpoint_id)
    SELECT published, w.id, w.endpoint_id FROM written w;
    IF publish.idempotency_key IS NULL THEN
        GET DIAGNOSTICS matched = ROW_COUNT;
        INSERT INTO courier.messages (id, event_type, tenant, payload, endpoints, created_at) OVERRIDING SYSTEM VALUE
        VALUES (published, publish.event_type, publish.tenant, publish.payload, matched, published_at);
    END IF;
    IF matched = 0 THEN
        RAISE NOTICE 'courier.publish: message % (%) matched no endpoint; it is kept', published, publish.event_type;
    END IF;
    RETURN published;
END;
$$;

-- Roles ------------------------------------------------------------------------------------------

REVOKE EXECUTE ON FUNCTION courier.endpoint_follow() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION courier.record_endpoint_outcomes(text[], text[], bigint[], bigint[], text[], text[], bigint[], interval, integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION courier.record_endpoint_outcomes(text[], text[], bigint[], bigint[], text[], text[], bigint[], interval, integer)
    TO courier_worker;
GRANT SELECT, INSERT, UPDATE ON courier.endpoint_health TO courier_worker;
GRANT UPDATE (gate) ON courier.jobs TO courier_worker, courier_operator;
GRANT SELECT ON courier.endpoint_health TO courier_operator, courier_producer;
