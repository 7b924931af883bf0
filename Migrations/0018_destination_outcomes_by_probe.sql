-- 0018: the outcome batch finds its hosts' destination rows one probe per host.
--
-- courier.record_destination_outcomes (0005) selected the destination rows of a batch's hosts
-- with `d.host = ANY (outcome_hosts)`. Inside a function that array is a parameter, which the
-- planner takes for ten elements; while courier.destinations has not been analyzed since its
-- rows arrived (a worker's first minutes among new hosts, every benchmark), it chose a
-- sequential scan and compared every row with every host of the batch: with 1,000 receiving
-- hosts and a batch of 100 outcomes, 100,000 text comparisons, twice, where the rows wanted are
-- 100 index probes away. A join with the unnested array is no cure: with those statistics the
-- planner nests the array inside the scan of the table, the same comparisons.
--
-- Now each distinct host of the batch, in host order (the order claims lock in), looks its row
-- up through the primary key in a LATERAL subquery, which the planner cannot turn inside out,
-- and locks it. The UPDATE then finds the locked rows by their tuple ids (a TID scan): no other
-- transaction can move a row this one holds locked. Nothing else in the function changes.

CREATE OR REPLACE FUNCTION courier.record_destination_outcomes(outcome_hosts text[], signals text[], reasons text[])
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
                FROM unnest(outcome_hosts, signals, reasons) WITH ORDINALITY AS u(host, signal, reason, n)
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
