-- 0012: courier.deliveries — the links of webhook deliveries, kept out of the jobs' hot updates.
--
-- 0011 found a message's jobs and an endpoint's jobs through two partial indexes on courier.jobs
-- (message_id; endpoint_id, id). A job's row is updated when it is claimed and when its outcome is
-- written, and neither update can be HOT (the claim index changes), so every one of them also
-- wrote an entry into both indexes: a drain of fan-out jobs ran at 85-92% of a drain of plain jobs
-- (100,000 jobs, release build), and at 106-112% with the two indexes dropped.
--
-- The links never change once written, so they now live in their own insert-only table, written
-- by the statement that writes the jobs (courier.publish, re-send, recovery). Claims and outcomes
-- touch only courier.jobs, whose webhook rows now cost what plain rows cost. Jobs keep message_id,
-- endpoint_id and resent_from (the claim reads endpoint_id from the row it updates).
--
-- A link outlives its job when retention removes the job; it goes with its message, which the
-- worker's maintenance deletes once no delivery of it is left. Readers join the link to its job.

CREATE TABLE courier.deliveries (
    message_id bigint NOT NULL,
    job_id bigint NOT NULL,
    endpoint_id bigint NOT NULL,
    PRIMARY KEY (message_id, job_id)
);
COMMENT ON TABLE courier.deliveries IS
    'Which job delivers which message to which endpoint: one row per webhook delivery (re-sends included), written '
    'with the job and never updated, so the jobs'' claims and outcomes pay no index for it. Deleted with its message.';
COMMENT ON COLUMN courier.deliveries.message_id IS 'The message (courier.messages).';
COMMENT ON COLUMN courier.deliveries.job_id IS 'The job that delivers it (courier.jobs); gone once retention removed it.';
COMMENT ON COLUMN courier.deliveries.endpoint_id IS 'The endpoint it goes to (courier.endpoints); kept after a delete.';
COMMENT ON INDEX courier.deliveries_pkey IS 'A message''s deliveries, oldest first (its page, re-send, recovery, retention).';
CREATE INDEX deliveries_endpoint_idx ON courier.deliveries (endpoint_id, job_id);
COMMENT ON INDEX courier.deliveries_endpoint_idx IS
    'An endpoint''s deliveries, newest last (its page and health, its deletion).';

INSERT INTO courier.deliveries (message_id, job_id, endpoint_id)
SELECT j.message_id, j.id, j.endpoint_id FROM courier.jobs j
WHERE j.message_id IS NOT NULL AND j.endpoint_id IS NOT NULL;

DROP INDEX courier.jobs_message_idx;
DROP INDEX courier.jobs_endpoint_idx;

-- Publish, as in 0011, with the links written by the statement that writes the jobs.
CREATE OR REPLACE FUNCTION courier.publish(
    event_type text, payload jsonb, tenant text DEFAULT NULL, idempotency_key text DEFAULT NULL
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
BEGIN
    problem := coalesce(
        courier.event_type_problem(publish.event_type),
        CASE WHEN publish.payload IS NULL THEN 'payload is required (a JSON value; ''{}'' for none)' END,
        courier.tenant_problem(publish.tenant),
        CASE WHEN publish.idempotency_key IS NOT NULL
                  AND (publish.idempotency_key = '' OR length(publish.idempotency_key) > 255)
             THEN 'idempotency_key must be 1-255 characters when given' END);
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
    -- per endpoint of the tenant), and its link.
    WITH written AS (
        INSERT INTO courier.jobs (queue, method, url, headers, body, max_attempts, run_at, message_id, endpoint_id)
        SELECT e.queue, 'POST', e.url, courier.message_headers(published, e.headers), body, coalesce(q.max_attempts, 10),
               CASE WHEN e.rate_limit IS NULL THEN now() ELSE courier.endpoint_slot(e.id, e.rate_limit) END,
               published, e.id
        FROM courier.endpoints e
        LEFT JOIN courier.queues q ON q.name = e.queue
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

-- The view reads the links, so a producer's query of one message walks deliveries_pkey.
CREATE OR REPLACE VIEW courier.message_deliveries AS
SELECT m.id AS message_id, m.event_type, m.tenant, m.created_at AS published_at,
       j.endpoint_id, j.id AS job_id, j.resent_from, j.state, j.attempt, j.max_attempts, j.run_at,
       j.finished_at, j.last_status, j.last_error
FROM courier.messages m
JOIN courier.deliveries l ON l.message_id = m.id
JOIN courier.jobs j ON j.id = l.job_id;

-- Roles: publish writes links as its owner; re-send and recovery write them as the operator; the
-- worker's maintenance deletes them with their message.
GRANT SELECT, INSERT ON courier.deliveries TO courier_operator;
GRANT SELECT, DELETE ON courier.deliveries TO courier_worker;

COMMENT ON TABLE courier.messages IS
    'One row per published event (courier.publish); courier.deliveries links it to the jobs that deliver it.';
