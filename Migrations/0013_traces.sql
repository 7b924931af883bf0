-- 0013: traces — a W3C trace context carried from the producer's transaction to the receiver.
--
-- courier.jobs.traceparent holds the producer's `traceparent` (W3C Trace Context). The worker
-- makes each attempt a span whose parent is that context and sends the span's own traceparent
-- to the receiver; without tracing it forwards the stored value unchanged. Either way the
-- receiver's trace continues the producer's.
--
-- courier.enqueue, courier.enqueue_raw and courier.publish take it as a last argument,
-- `traceparent`; without one they read the transaction's setting courier.traceparent, so a
-- producer whose calls are written already can add `SET LOCAL courier.traceparent = '00-...'`
-- and nothing else. A malformed value raises SQLSTATE 22023 and writes nothing.
--
-- A new column without a default: no rewrite of courier.jobs, instant on any size. Changing a
-- function's arguments means a new function, so the three are dropped and created again, with
-- their bodies as in 0004 (enqueue, enqueue_raw) and 0012 (publish), their grants and comments.

ALTER TABLE courier.jobs ADD COLUMN traceparent text;
COMMENT ON COLUMN courier.jobs.traceparent IS
    'The producer''s W3C trace context (00-<trace id>-<parent id>-<flags>), or NULL: the parent of each attempt''s span, and the traceparent header the receiver gets when the worker does not trace.';

CREATE FUNCTION courier.traceparent_problem(traceparent text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN traceparent IS NULL THEN NULL
        WHEN traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
             AND left(traceparent, 2) <> 'ff'
             AND substr(traceparent, 4, 32) <> repeat('0', 32)
             AND substr(traceparent, 37, 16) <> repeat('0', 16) THEN NULL
        ELSE 'traceparent must be a W3C trace context, 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, got '
             || quote_literal(regexp_replace(left(traceparent, 100), '[[:cntrl:]]', '?', 'g'))
    END
$$;
COMMENT ON FUNCTION courier.traceparent_problem(text) IS
    'NULL for NULL or a valid W3C traceparent (lower-case hex, version not ff, trace id and parent id not all zeros), else why not.';

CREATE FUNCTION courier.current_traceparent(traceparent text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(nullif(traceparent, ''), nullif(current_setting('courier.traceparent', true), ''))
$$;
COMMENT ON FUNCTION courier.current_traceparent(text) IS
    'The trace context a job is written with: the argument, or else the transaction''s setting courier.traceparent (SET LOCAL); NULL when both are NULL or empty.';

DROP FUNCTION courier.enqueue(text, jsonb, text, jsonb, text, timestamptz, integer, text, integer, interval[]);
DROP FUNCTION courier.enqueue_raw(text, bytea, text, jsonb, text, timestamptz, integer, text, integer, interval[]);
DROP FUNCTION courier.publish(text, jsonb, text, text);

CREATE FUNCTION courier.enqueue_raw(
    url text,
    body bytea,
    method text DEFAULT 'POST',
    headers jsonb DEFAULT '{}',
    queue text DEFAULT 'default',
    run_at timestamptz DEFAULT now(),
    max_attempts integer DEFAULT NULL,
    idempotency_key text DEFAULT NULL,
    priority integer DEFAULT 0,
    retry_schedule interval[] DEFAULT NULL,
    traceparent text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    new_id bigint;
    attempts integer;
    problem text;
    trace_context text := courier.current_traceparent(enqueue_raw.traceparent);
BEGIN
    -- The request (url, method, headers, body) is checked by the INSERT's trigger. NULLs and
    -- run_at are checked here too, so they fail with this message rather than a NOT NULL or CHECK
    -- constraint's (the trigger runs after those); run_at costs one lookup of the queue.
    problem := coalesce(
        courier.settings_problem(enqueue_raw.queue, enqueue_raw.max_attempts, enqueue_raw.priority,
                                 enqueue_raw.retry_schedule, enqueue_raw.idempotency_key),
        CASE WHEN enqueue_raw.url IS NULL THEN 'url is required'
             WHEN enqueue_raw.method IS NULL THEN 'method is required'
             WHEN enqueue_raw.headers IS NULL THEN 'headers must be a JSON object of strings'
        END,
        courier.run_at_problem(enqueue_raw.queue, enqueue_raw.run_at),
        courier.traceparent_problem(trace_context));
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION '%', problem USING ERRCODE = '22023';
    END IF;
    attempts := coalesce(enqueue_raw.max_attempts,
        (SELECT q.max_attempts FROM courier.queues q WHERE q.name = enqueue_raw.queue), 10);
    INSERT INTO courier.jobs AS j (queue, priority, method, url, headers, body, max_attempts, retry_schedule,
                                   run_at, idempotency_key, traceparent)
    -- Only an ASCII method is upper-cased: upper() maps some other letters to ASCII ones, and
    -- the trigger must see what the caller sent to refuse a method that is not a token.
    VALUES (enqueue_raw.queue, enqueue_raw.priority,
            CASE WHEN octet_length(enqueue_raw.method) = char_length(enqueue_raw.method)
                 THEN upper(enqueue_raw.method) ELSE enqueue_raw.method END,
            enqueue_raw.url,
            enqueue_raw.headers, enqueue_raw.body, attempts, enqueue_raw.retry_schedule, enqueue_raw.run_at,
            enqueue_raw.idempotency_key, trace_context)
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING j.id INTO new_id;
    IF new_id IS NULL THEN
        -- The key exists: nothing was inserted and the trigger saw no row. Bad input is still an
        -- error, as it would have been without the key.
        PERFORM courier.validate_job(enqueue_raw.url, enqueue_raw.method, enqueue_raw.headers, enqueue_raw.queue,
            coalesce(octet_length(enqueue_raw.body), 0), enqueue_raw.max_attempts, enqueue_raw.priority,
            enqueue_raw.retry_schedule, enqueue_raw.idempotency_key, enqueue_raw.run_at);
        SELECT j.id INTO new_id FROM courier.jobs j
        WHERE j.queue = enqueue_raw.queue AND j.idempotency_key = enqueue_raw.idempotency_key;
    END IF;
    RETURN new_id;
END;
$$;
COMMENT ON FUNCTION courier.enqueue_raw(text, bytea, text, jsonb, text, timestamptz, integer, text, integer, interval[], text) IS
    'Enqueues an HTTP job with a raw body (any bytes, or NULL for none) and returns its id; with an '
    'idempotency key already in the queue, returns the existing id and writes nothing. traceparent '
    '(else the setting courier.traceparent) is the producer''s W3C trace context.';

CREATE FUNCTION courier.enqueue(
    url text,
    payload jsonb,
    method text DEFAULT 'POST',
    headers jsonb DEFAULT '{}',
    queue text DEFAULT 'default',
    run_at timestamptz DEFAULT now(),
    max_attempts integer DEFAULT NULL,
    idempotency_key text DEFAULT NULL,
    priority integer DEFAULT 0,
    retry_schedule interval[] DEFAULT NULL,
    traceparent text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    request_headers jsonb := enqueue.headers;
BEGIN
    -- A JSON payload is sent as JSON unless the caller chose a Content-Type.
    IF enqueue.payload IS NOT NULL AND jsonb_typeof(request_headers) = 'object' AND NOT EXISTS (
        SELECT 1 FROM jsonb_object_keys(request_headers) k WHERE lower(k) = 'content-type'
    ) THEN
        request_headers := request_headers || '{"Content-Type": "application/json"}'::jsonb;
    END IF;
    RETURN courier.enqueue_raw(
        url => enqueue.url,
        body => convert_to(enqueue.payload::text, 'UTF8'),
        method => enqueue.method,
        headers => request_headers,
        queue => enqueue.queue,
        run_at => enqueue.run_at,
        max_attempts => enqueue.max_attempts,
        idempotency_key => enqueue.idempotency_key,
        priority => enqueue.priority,
        retry_schedule => enqueue.retry_schedule,
        traceparent => enqueue.traceparent);
END;
$$;
COMMENT ON FUNCTION courier.enqueue(text, jsonb, text, jsonb, text, timestamptz, integer, text, integer, interval[], text) IS
    'Enqueues an HTTP job whose body is the JSON payload (Content-Type: application/json unless given) '
    'and returns its id. Validates every field and raises a clear error, writing nothing, on bad input. '
    'traceparent (else the setting courier.traceparent) is the producer''s W3C trace context.';

-- Publish, as in 0012, with the trace context written on every delivery.
CREATE FUNCTION courier.publish(
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
    -- per endpoint of the tenant), and its link.
    WITH written AS (
        INSERT INTO courier.jobs (queue, method, url, headers, body, max_attempts, run_at, message_id, endpoint_id,
                                  traceparent)
        SELECT e.queue, 'POST', e.url, courier.message_headers(published, e.headers), body, coalesce(q.max_attempts, 10),
               CASE WHEN e.rate_limit IS NULL THEN now() ELSE courier.endpoint_slot(e.id, e.rate_limit) END,
               published, e.id, trace_context
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
COMMENT ON FUNCTION courier.publish(text, jsonb, text, text, text) IS
    'Publishes an event in the caller''s transaction and returns the message id: one courier.messages row and one job '
    'per enabled endpoint of the tenant whose event types and payload filter match. The same idempotency key for the '
    'same tenant returns the first message and fans out nothing. A message that matched no endpoint is kept (NOTICE). '
    'traceparent (else the setting courier.traceparent) is written on every delivery.';

-- The grants of 0004 and 0011 went with the old functions.
REVOKE EXECUTE ON FUNCTION courier.enqueue(text, jsonb, text, jsonb, text, timestamptz, integer, text, integer, interval[], text)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION courier.enqueue_raw(text, bytea, text, jsonb, text, timestamptz, integer, text, integer, interval[], text)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION courier.publish(text, jsonb, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION courier.enqueue(text, jsonb, text, jsonb, text, timestamptz, integer, text, integer, interval[], text)
    TO courier_producer, courier_operator;
GRANT EXECUTE ON FUNCTION courier.enqueue_raw(text, bytea, text, jsonb, text, timestamptz, integer, text, integer, interval[], text)
    TO courier_producer, courier_operator;
GRANT EXECUTE ON FUNCTION courier.publish(text, jsonb, text, text, text) TO courier_producer, courier_operator;
