-- 0022: an outcome batch's arrays travel with their places instead of being sorted one by one.
--
-- The worker's outcome statement handed courier.record_destination_outcomes and
-- courier.record_endpoint_outcomes ten arrays, each built by array_agg(... ORDER BY o.n) so that
-- the functions could take batch order from the arrays' order. PostgreSQL 15 sorts the input of
-- every ordered aggregate on its own: ten sorts of the batch per outcome statement, about 4 % of
-- the instructions PostgreSQL spends on a delivered job (a callgrind count of the worker's
-- backend over a 5,000-job drain: 379,000 to 384,000 per job with the sorts, 364,000 to 367,000
-- without).
--
-- Aggregates of one query see the same rows in the same order, so arrays built side by side
-- without ORDER BY are aligned with each other, though not in batch order. Each function now
-- takes one more array, `places`: the batch position of each element. They read batch order from
-- it, not from the arrays' order; without it (NULL, the default, as callers of the old signature
-- pass) the arrays' order is batch order, as before. A worker of the previous release, whose
-- statement calls the functions without `places`, keeps working during a rolling upgrade.
--
-- The bodies are those of migrations 0018 and 0014 but for where `n` comes from.

DROP FUNCTION courier.record_destination_outcomes(text[], text[], text[]);

CREATE FUNCTION courier.record_destination_outcomes(
    outcome_hosts text[], signals text[], reasons text[], places bigint[] DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    locked tid[];
BEGIN
    IF outcome_hosts IS NULL THEN
        RETURN;
    END IF;
    IF NOT ('failed' = ANY (signals) OR 'gone' = ANY (signals)) THEN
        -- The common case: every receiver answered. Write only the rows that change (a streak or
        -- an open breaker to reset, last_success_at older than a second), so a busy host's row
        -- is not locked and rewritten by every batch. Locks are taken in host order, the order
        -- claims take them in, so two writers never wait for each other in a cycle.
        SELECT array_agg(x.ctid) INTO locked
        FROM (SELECT DISTINCT u.host COLLATE "C" AS host FROM unnest(outcome_hosts) AS u(host) ORDER BY 1) h
        CROSS JOIN LATERAL (
            SELECT d.ctid FROM courier.destinations d
            WHERE d.host = h.host
              AND (d.failure_streak > 0 OR d.opened_at IS NOT NULL OR d.last_success_at IS NULL
                   OR d.last_success_at < now() - interval '1 second')
            FOR UPDATE
        ) x;
        UPDATE courier.destinations d
        SET failure_streak = 0, opened_at = NULL, probe_at = NULL, last_success_at = now(), updated_at = now()
        WHERE d.ctid = ANY (locked);
        RETURN;
    END IF;
    SELECT array_agg(x.ctid) INTO locked
    FROM (SELECT DISTINCT u.host COLLATE "C" AS host FROM unnest(outcome_hosts) AS u(host) ORDER BY 1) h
    CROSS JOIN LATERAL (SELECT d.ctid FROM courier.destinations d WHERE d.host = h.host FOR UPDATE) x;
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
                FROM (SELECT v.host, v.signal, v.reason, coalesce(v.place, v.i) AS n
                      FROM unnest(outcome_hosts, signals, reasons, places) WITH ORDINALITY
                          AS v(host, signal, reason, place, i)) u
            ) o
            GROUP BY o.host
        ) s
        JOIN (SELECT * FROM courier.destinations WHERE ctid = ANY (locked)) x ON x.host = s.host
        CROSS JOIN LATERAL (
            SELECT CASE WHEN s.last_ok IS NULL THEN x.failure_streak + s.failures ELSE s.failures_after_ok END AS streak
        ) k
    ) c
    WHERE d.ctid = ANY (locked) AND d.host = c.host;
END;
$$;

COMMENT ON FUNCTION courier.record_destination_outcomes(text[], text[], text[], bigint[]) IS
    'Applies a batch of attempt outcomes, in order (places: each element''s position in the batch; NULL: the arrays'' '
    'order), to their destinations: signal answered resets the failure streak and closes the breaker; failed counts '
    'towards breaker_threshold and (re)opens it; gone (410) disables the destination with the reason unless '
    'disable_on_gone is false.';

DROP FUNCTION courier.record_endpoint_outcomes(text[], text[], bigint[], bigint[], text[], text[], bigint[], interval, integer);

CREATE FUNCTION courier.record_endpoint_outcomes(
    keys text[], hosts text[], endpoint_ids bigint[], message_ids bigint[], signals text[], states text[],
    job_ids bigint[], default_disable_after interval, default_disable_dead integer, places bigint[] DEFAULT NULL
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
            FROM (SELECT v.key, v.host, v.endpoint_id, v.signal, v.state, coalesce(v.place, v.i) AS n
                  FROM unnest(keys, hosts, endpoint_ids, signals, states, places) WITH ORDINALITY
                      AS v(key, host, endpoint_id, signal, state, place, i)) u
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

COMMENT ON FUNCTION courier.record_endpoint_outcomes(text[], text[], bigint[], bigint[], text[], text[], bigint[], interval, integer, bigint[]) IS
    'Applies a batch of outcomes, in order (places: each element''s position in the batch; NULL: the arrays'' order), '
    'to their endpoints: endpointFailed counts towards the breaker (the host''s threshold and cool-down), answered '
    'closes it; dead deliveries and failed attempts feed the auto-disable of registered endpoints; a message whose '
    'every delivery died publishes courier.message.failed.';

REVOKE EXECUTE ON FUNCTION courier.record_endpoint_outcomes(text[], text[], bigint[], bigint[], text[], text[], bigint[], interval, integer, bigint[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION courier.record_endpoint_outcomes(text[], text[], bigint[], bigint[], text[], text[], bigint[], interval, integer, bigint[])
    TO courier_worker;
