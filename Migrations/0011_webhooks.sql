-- 0011: webhooks — endpoints, their secrets, messages, and courier.publish.
--
-- The layer above the queue that a webhook platform sells, inside the producer's transaction:
--
--   1. courier.endpoints: the receivers a producer's customers registered (a tenant, a URL, the
--      event types they want, an optional payload filter, extra headers, the queue that carries
--      their deliveries, an optional rate limit, disabled state).
--   2. courier.endpoint_secrets: each endpoint's Standard Webhooks secrets, the current one and
--      those being retired until their expiry. Only sealed values are stored (AES-256-GCM, done
--      by the CLI, the console and the worker with the key in COURIER_SECRETS_KEY_FILE), so a
--      dump of the database holds no secret.
--   3. courier.messages: one row per published event; courier.publish(...) writes it and one job
--      per enabled endpoint of the tenant whose filters match, in the caller's transaction. Every job of a message carries the same `webhook-id: msg_<id>`, on every
--      attempt and every re-send, so receivers can drop duplicates.
--   4. courier.jobs.message_id, endpoint_id and resent_from link a delivery to its message, its
--      endpoint and the delivery it re-sends. Plain jobs leave them NULL and pay nothing: the new
--      indexes hold message jobs only. They are not foreign keys: an endpoint or message may go
--      while the history of its deliveries stays, and the hot path checks nothing more per row.
--
-- New columns without defaults and new tables: no rewrite of courier.jobs, instant on any size.

-- Validation -------------------------------------------------------------------------------------

CREATE FUNCTION courier.event_type_problem(event_type text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN event_type IS NULL OR event_type = '' THEN 'event_type is required'
        WHEN octet_length(event_type) > 256 THEN 'event_type must be at most 256 bytes'
        WHEN event_type !~ '^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$' THEN
            'event_type must be words of A-Z a-z 0-9 _ - separated by dots (e.g. invoice.paid), got '
            || quote_literal(regexp_replace(left(event_type, 100), '[[:cntrl:]]', '?', 'g'))
    END
$$;
COMMENT ON FUNCTION courier.event_type_problem(text) IS
    'NULL when an event type is valid (dot-separated words of A-Z a-z 0-9 _ -, at most 256 bytes), else why not.';

CREATE FUNCTION courier.event_patterns_problem(patterns text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN patterns IS NULL THEN 'event_types must be a list (empty: no event)'
        WHEN cardinality(patterns) > 100 THEN 'event_types holds at most 100 patterns'
        ELSE (SELECT 'event_types: ' || quote_literal(regexp_replace(left(coalesce(p, 'NULL'), 100), '[[:cntrl:]]', '?', 'g'))
                     || ' is not an event type, a prefix.* pattern or *'
              FROM unnest(patterns) AS p
              WHERE p IS NULL OR (p <> '*' AND courier.event_type_problem(
                  CASE WHEN right(p, 2) = '.*' THEN left(p, -2) ELSE p END) IS NOT NULL)
              LIMIT 1)
    END
$$;
COMMENT ON FUNCTION courier.event_patterns_problem(text[]) IS
    'NULL when every pattern is an event type, prefix.* (every type under the prefix) or * (every type), else why not.';

CREATE FUNCTION courier.event_type_keys(event_type text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    keys text[] := ARRAY[event_type, '*'];
    parts text[] := string_to_array(event_type, '.');
    prefix text := '';
BEGIN
    FOR i IN 1 .. coalesce(array_length(parts, 1), 0) - 1 LOOP
        prefix := prefix || parts[i] || '.';
        keys := keys || (prefix || '*');
    END LOOP;
    RETURN keys;
END;
$$;
COMMENT ON FUNCTION courier.event_type_keys(text) IS
    'Every pattern that takes an event type: the type itself, *, and prefix.* for each of its prefixes '
    '(invoice.line.added: invoice.line.added, *, invoice.*, invoice.line.*). An endpoint takes the type when its '
    'event_types overlap these (&&), one array comparison per endpoint.';

CREATE FUNCTION courier.event_type_matches(patterns text[], event_type text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT patterns && courier.event_type_keys(event_type)
$$;
COMMENT ON FUNCTION courier.event_type_matches(text[], text) IS
    'True when one of the patterns takes the event type: equal, *, or prefix.* for a type under prefix.';

CREATE FUNCTION courier.tenant_problem(tenant text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN tenant IS NULL THEN NULL
        WHEN tenant = '' OR octet_length(tenant) > 256 OR tenant ~ '[[:cntrl:]]' THEN
            'tenant must be 1-256 bytes without control characters when given'
    END
$$;
COMMENT ON FUNCTION courier.tenant_problem(text) IS
    'NULL when a tenant is NULL (internal receivers) or 1-256 bytes without control characters, else why not.';

CREATE FUNCTION courier.endpoint_problem(
    tenant text, url text, description text, event_types text[], payload_filter jsonb, headers jsonb,
    queue text, rate_limit double precision, disabled_reason text
) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    reserved text;
BEGIN
    IF headers IS NULL OR jsonb_typeof(headers) <> 'object' THEN
        RETURN 'headers must be a JSON object of strings';
    END IF;
    SELECT k INTO reserved FROM jsonb_object_keys(headers) AS k
    WHERE lower(k) LIKE 'webhook-%' OR lower(k) LIKE 'courier-%' OR lower(k) IN ('content-type', 'content-length', 'host')
    LIMIT 1;
    IF reserved IS NOT NULL THEN
        RETURN 'headers: ' || quote_literal(left(reserved, 100)) || ' is set by Courier and cannot be given';
    END IF;
    RETURN coalesce(
        courier.tenant_problem(tenant),
        -- With the two headers every delivery adds, so a delivery's request is always one the
        -- jobs' checks accept (see courier.jobs_check_inserted below).
        courier.request_problem(url, 'POST',
            headers || '{"webhook-id": "msg_9223372036854775807", "Content-Type": "application/json"}', 0),
        CASE WHEN description IS NULL OR octet_length(description) > 1024 THEN
            'description must be at most 1024 bytes' END,
        courier.event_patterns_problem(event_types),
        CASE WHEN payload_filter IS NOT NULL AND jsonb_typeof(payload_filter) <> 'object' THEN
            'payload_filter must be a JSON object (the payload must contain it)' END,
        CASE WHEN payload_filter IS NOT NULL AND octet_length(payload_filter::text) > 65536 THEN
            'payload_filter must be at most 65536 bytes' END,
        courier.settings_problem(queue, NULL, 0, NULL, NULL),
        CASE WHEN rate_limit IS NOT NULL AND NOT (rate_limit > 0 AND rate_limit <= 100000) THEN
            'rate_limit must be between 0 and 100000 requests per second (exclusive of 0), got ' || rate_limit END,
        CASE WHEN octet_length(disabled_reason) > 1024 THEN 'disabled_reason must be at most 1024 bytes' END);
END;
$$;
COMMENT ON FUNCTION courier.endpoint_problem(text, text, text, text[], jsonb, jsonb, text, double precision, text) IS
    'NULL when an endpoint row is valid, else why not: tenant, url and headers (as a job''s, without the headers '
    'Courier sets: webhook-*, courier-*, content-type, content-length, host), description, event type patterns, '
    'payload filter (a JSON object), queue, rate limit.';

-- Endpoints --------------------------------------------------------------------------------------

CREATE TABLE courier.endpoints (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text,
    url text NOT NULL,
    description text NOT NULL DEFAULT '',
    event_types text[] NOT NULL DEFAULT '{}',
    payload_filter jsonb,
    headers jsonb NOT NULL DEFAULT '{}',
    queue text NOT NULL DEFAULT 'webhooks',
    rate_limit double precision,
    ordered boolean NOT NULL DEFAULT false,
    disabled_at timestamptz,
    disabled_reason text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT endpoints_disabled_has_reason CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL))
);
COMMENT ON TABLE courier.endpoints IS
    'Webhook endpoints: where courier.publish sends the events of a tenant. Secrets are in courier.endpoint_secrets.';
COMMENT ON COLUMN courier.endpoints.id IS 'Endpoint id.';
COMMENT ON COLUMN courier.endpoints.tenant IS
    'The producer''s customer or application this endpoint belongs to; NULL for internal receivers.';
COMMENT ON COLUMN courier.endpoints.url IS 'Absolute http or https URL the deliveries are POSTed to.';
COMMENT ON COLUMN courier.endpoints.description IS 'Free text for people.';
COMMENT ON COLUMN courier.endpoints.event_types IS
    'Event types this endpoint receives: exact types, prefix.* patterns, or * for all; empty: none.';
COMMENT ON COLUMN courier.endpoints.payload_filter IS
    'When set, only payloads that contain this JSON object (payload @> filter) are sent.';
COMMENT ON COLUMN courier.endpoints.headers IS 'Extra request headers, a JSON object of strings.';
COMMENT ON COLUMN courier.endpoints.queue IS 'Queue of the deliveries (its settings: attempts, schedule, pause).';
COMMENT ON COLUMN courier.endpoints.rate_limit IS
    'First deliveries per second at most; publishes to this endpoint are spaced by courier.endpoint_pacing. NULL: no limit.';
COMMENT ON COLUMN courier.endpoints.ordered IS 'Deliveries go one at a time in publish order (enforced by the claim).';
COMMENT ON COLUMN courier.endpoints.disabled_at IS 'When the endpoint was disabled; NULL while enabled. Disabled endpoints receive no new messages.';
COMMENT ON COLUMN courier.endpoints.disabled_reason IS 'Why it was disabled.';
COMMENT ON COLUMN courier.endpoints.created_at IS 'When the endpoint was added.';
COMMENT ON COLUMN courier.endpoints.updated_at IS 'When a setting last changed.';
COMMENT ON CONSTRAINT endpoints_disabled_has_reason ON courier.endpoints IS 'A disabled endpoint says why.';

CREATE INDEX endpoints_tenant_idx ON courier.endpoints ((coalesce(tenant, ''))) WHERE disabled_at IS NULL;
COMMENT ON INDEX courier.endpoints_tenant_idx IS 'Serves courier.publish: the enabled endpoints of a tenant.';

CREATE FUNCTION courier.endpoints_check() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    problem text;
BEGIN
    problem := courier.endpoint_problem(NEW.tenant, NEW.url, NEW.description, NEW.event_types, NEW.payload_filter,
                                        NEW.headers, NEW.queue, NEW.rate_limit, NEW.disabled_reason);
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION '%', problem USING ERRCODE = '22023';
    END IF;
    IF TG_OP = 'UPDATE' THEN
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION courier.endpoints_check() IS
    'Row trigger: refuses an endpoint that breaks courier.endpoint_problem (SQLSTATE 22023); stamps updated_at.';
CREATE TRIGGER endpoints_check BEFORE INSERT OR UPDATE ON courier.endpoints
    FOR EACH ROW EXECUTE FUNCTION courier.endpoints_check();
COMMENT ON TRIGGER endpoints_check ON courier.endpoints IS 'Validates every written endpoint row.';

CREATE TABLE courier.endpoint_secrets (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id bigint NOT NULL REFERENCES courier.endpoints (id) ON DELETE CASCADE,
    sealed bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    CONSTRAINT endpoint_secrets_sealed_size CHECK (octet_length(sealed) BETWEEN 29 AND 1024)
);
COMMENT ON TABLE courier.endpoint_secrets IS
    'Standard Webhooks secrets of each endpoint, sealed with AES-256-GCM (nonce, ciphertext, tag) under the key in '
    'COURIER_SECRETS_KEY_FILE; the database never holds one in clear. While several are valid, each request carries '
    'one signature per secret.';
COMMENT ON COLUMN courier.endpoint_secrets.id IS 'Secret id; a higher id is a newer secret.';
COMMENT ON COLUMN courier.endpoint_secrets.endpoint_id IS 'The endpoint it signs for.';
COMMENT ON COLUMN courier.endpoint_secrets.sealed IS
    'AES-256-GCM: 12-byte nonce, the sealed whsec_ text, 16-byte tag; the endpoint id is the associated data.';
COMMENT ON COLUMN courier.endpoint_secrets.created_at IS 'When it was made.';
COMMENT ON COLUMN courier.endpoint_secrets.expires_at IS 'NULL for the current secret; a retired one signs until then.';
COMMENT ON CONSTRAINT endpoint_secrets_sealed_size ON courier.endpoint_secrets IS 'A sealed secret is nonce, text and tag.';
CREATE UNIQUE INDEX endpoint_secrets_current_idx ON courier.endpoint_secrets (endpoint_id) WHERE expires_at IS NULL;
COMMENT ON INDEX courier.endpoint_secrets_current_idx IS 'At most one current secret per endpoint.';
CREATE INDEX endpoint_secrets_endpoint_idx ON courier.endpoint_secrets (endpoint_id, id);
COMMENT ON INDEX courier.endpoint_secrets_endpoint_idx IS 'Serves the claim: the secrets of a delivery''s endpoint.';

CREATE TABLE courier.endpoint_pacing (
    endpoint_id bigint PRIMARY KEY REFERENCES courier.endpoints (id) ON DELETE CASCADE,
    next_at timestamptz NOT NULL DEFAULT '-infinity'
);
COMMENT ON TABLE courier.endpoint_pacing IS
    'For endpoints with a rate limit: the earliest time the next published delivery may start. courier.publish '
    'moves it on by 1/rate_limit per delivery, so publishes to one rate-limited endpoint wait for each other''s commit.';
COMMENT ON COLUMN courier.endpoint_pacing.endpoint_id IS 'The rate-limited endpoint.';
COMMENT ON COLUMN courier.endpoint_pacing.next_at IS 'The first free start time.';

-- Messages ---------------------------------------------------------------------------------------

CREATE TABLE courier.messages (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_type text NOT NULL,
    tenant text,
    payload jsonb NOT NULL,
    idempotency_key text,
    endpoints integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT messages_valid CHECK (courier.event_type_problem(event_type) IS NULL
        AND courier.tenant_problem(tenant) IS NULL
        AND (idempotency_key IS NULL OR (idempotency_key <> '' AND length(idempotency_key) <= 255))
        AND endpoints >= 0)
);
COMMENT ON TABLE courier.messages IS
    'One row per published event (courier.publish); its deliveries are the jobs with message_id = id.';
COMMENT ON COLUMN courier.messages.id IS 'Message id; receivers see webhook-id: msg_<id> on every delivery of it.';
COMMENT ON COLUMN courier.messages.event_type IS 'Event type, e.g. invoice.paid.';
COMMENT ON COLUMN courier.messages.tenant IS 'Tenant whose endpoints it was sent to; NULL: the internal endpoints.';
COMMENT ON COLUMN courier.messages.payload IS 'The event''s data; the body is {"type", "timestamp", "data"} around it.';
COMMENT ON COLUMN courier.messages.idempotency_key IS 'Publishing the same key for the same tenant again returns this message.';
COMMENT ON COLUMN courier.messages.endpoints IS 'Endpoints it was fanned out to when published (0: none matched).';
COMMENT ON COLUMN courier.messages.created_at IS 'When it was published; the body''s timestamp.';
COMMENT ON CONSTRAINT messages_valid ON courier.messages IS 'A valid event type, tenant and idempotency key.';
CREATE UNIQUE INDEX messages_idempotency_idx ON courier.messages (tenant, idempotency_key) NULLS NOT DISTINCT
    WHERE idempotency_key IS NOT NULL;
COMMENT ON INDEX courier.messages_idempotency_idx IS 'An idempotency key is unique per tenant (NULL tenant included).';
CREATE INDEX messages_created_idx ON courier.messages (created_at);
COMMENT ON INDEX courier.messages_created_idx IS 'Serves recovery (messages since a time) and retention.';

ALTER TABLE courier.jobs
    ADD COLUMN message_id bigint,
    ADD COLUMN endpoint_id bigint,
    ADD COLUMN resent_from bigint;
COMMENT ON COLUMN courier.jobs.message_id IS 'The message this job delivers (courier.messages); NULL for a plain job.';
COMMENT ON COLUMN courier.jobs.endpoint_id IS 'The endpoint it delivers to (courier.endpoints); its secrets sign it.';
COMMENT ON COLUMN courier.jobs.resent_from IS 'The delivery this job re-sends, when it is a re-send.';
CREATE INDEX jobs_message_idx ON courier.jobs (message_id) WHERE message_id IS NOT NULL;
COMMENT ON INDEX courier.jobs_message_idx IS 'A message''s deliveries; plain jobs are not in it.';
CREATE INDEX jobs_endpoint_idx ON courier.jobs (endpoint_id, id) WHERE endpoint_id IS NOT NULL;
COMMENT ON INDEX courier.jobs_endpoint_idx IS
    'An endpoint''s deliveries, newest last (its page, recovery, deletion); plain jobs are not in it.';

-- STABLE, as what they call (format, to_char, jsonb_build_object) is: so a query that calls them
-- gets them inlined, rather than planning their SQL again at every execution.
CREATE FUNCTION courier.message_body(event_type text, created_at timestamptz, payload jsonb) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT convert_to(format('{"type":%s,"timestamp":%s,"data":%s}', to_json(event_type),
        to_json(to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')), payload::text), 'UTF8')
$$;
COMMENT ON FUNCTION courier.message_body(text, timestamptz, jsonb) IS
    'The request body of every delivery of a message (Standard Webhooks): {"type", "timestamp" (UTC), "data"}.';

CREATE FUNCTION courier.message_headers(message_id bigint, endpoint_headers jsonb) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT endpoint_headers || jsonb_build_object('webhook-id', 'msg_' || message_id, 'Content-Type', 'application/json')
$$;
COMMENT ON FUNCTION courier.message_headers(bigint, jsonb) IS
    'The request headers of a delivery: the endpoint''s, webhook-id msg_<id> and Content-Type application/json.';

CREATE FUNCTION courier.endpoint_slot(endpoint_id bigint, rate_limit double precision) RETURNS timestamptz
LANGUAGE sql VOLATILE AS $$
    INSERT INTO courier.endpoint_pacing AS p (endpoint_id, next_at)
    VALUES (endpoint_slot.endpoint_id, now() + interval '1 second' / endpoint_slot.rate_limit)
    ON CONFLICT (endpoint_id) DO UPDATE
        SET next_at = greatest(p.next_at, now()) + interval '1 second' / endpoint_slot.rate_limit
    RETURNING p.next_at - interval '1 second' / endpoint_slot.rate_limit
$$;
COMMENT ON FUNCTION courier.endpoint_slot(bigint, double precision) IS
    'The start time of the next delivery to a rate-limited endpoint: its first free slot, which moves on by '
    '1/rate_limit (locks the endpoint''s pacing row until commit).';

-- Publish ----------------------------------------------------------------------------------------

CREATE FUNCTION courier.publish(
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
    -- One delivery per matching endpoint: a probe of endpoints_tenant_idx and one array overlap
    -- per endpoint of the tenant.
    INSERT INTO courier.jobs (queue, method, url, headers, body, max_attempts, run_at, message_id, endpoint_id)
    SELECT e.queue, 'POST', e.url, courier.message_headers(published, e.headers), body, coalesce(q.max_attempts, 10),
           CASE WHEN e.rate_limit IS NULL THEN now() ELSE courier.endpoint_slot(e.id, e.rate_limit) END,
           published, e.id
    FROM courier.endpoints e
    LEFT JOIN courier.queues q ON q.name = e.queue
    WHERE coalesce(e.tenant, '') = coalesce(publish.tenant, '') AND e.disabled_at IS NULL
      AND e.event_types && keys AND (e.payload_filter IS NULL OR publish.payload @> e.payload_filter);
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
COMMENT ON FUNCTION courier.publish(text, jsonb, text, text) IS
    'Publishes an event in the caller''s transaction and returns the message id: one courier.messages row and one job '
    'per enabled endpoint of the tenant whose event types and payload filter match. The same idempotency key for the '
    'same tenant returns the first message and fans out nothing. A message that matched no endpoint is kept (NOTICE).';

-- The jobs' insert check skips webhook deliveries -----------------------------------------------

-- A delivery's request is an endpoint's URL and headers, which courier.endpoint_problem checked
-- (with the headers a delivery adds) when the endpoint was written, and a body courier.publish
-- sized. Checking it again per publish cost about 30 us of the 270 us of PostgreSQL CPU a publish
-- takes (measured from /proc over 5,000 calls). A hand-written row that names an endpoint is not
-- checked here; the worker checks every request again before it sends (method, URL, port,
-- headers) and moves a bad one to the dead letters with the reason.
CREATE OR REPLACE FUNCTION courier.jobs_check_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    problem text;
BEGIN
    -- MATERIALIZED keeps the planner from pushing the check below the DISTINCT, which would
    -- call it once per row instead of once per request (measured: 2.9 s instead of 2 ms for
    -- 50,000 rows of 10 requests).
    WITH shapes AS MATERIALIZED (
        SELECT DISTINCT n.url, n.method, n.headers,
               CASE WHEN octet_length(n.body) > 1048576 THEN octet_length(n.body) ELSE 0 END AS body_size
        FROM new_jobs n
        WHERE n.endpoint_id IS NULL
    )
    SELECT p.problem INTO problem
    FROM (SELECT courier.request_problem(s.url, s.method, s.headers, s.body_size) AS problem FROM shapes s) p
    WHERE p.problem IS NOT NULL
    LIMIT 1;
    IF problem IS NULL THEN
        -- The latest run_at per queue against that queue's window: one lookup per queue.
        SELECT courier.run_at_problem(latest.queue, latest.run_at) INTO problem
        FROM (SELECT n.queue, max(n.run_at) AS run_at FROM new_jobs n GROUP BY n.queue) latest
        LEFT JOIN courier.queues q ON q.name = latest.queue
        WHERE latest.run_at > now() + coalesce(q.max_schedule_ahead, interval '1 year')
        LIMIT 1;
    END IF;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION '%', problem USING ERRCODE = '22023';
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION courier.jobs_check_inserted() IS
    'Statement trigger: refuses an INSERT into courier.jobs (SQLSTATE 22023) when a row''s request breaks '
    'courier.request_problem or its run_at is beyond its queue''s window; each distinct request is checked once. '
    'Webhook deliveries (endpoint_id set) were checked with their endpoint and are not checked again.';

-- What a producer reads ---------------------------------------------------------------------------

CREATE VIEW courier.message_deliveries AS
SELECT m.id AS message_id, m.event_type, m.tenant, m.created_at AS published_at,
       j.endpoint_id, j.id AS job_id, j.resent_from, j.state, j.attempt, j.max_attempts, j.run_at,
       j.finished_at, j.last_status, j.last_error
FROM courier.messages m
JOIN courier.jobs j ON j.message_id = m.id;
COMMENT ON VIEW courier.message_deliveries IS
    'Each delivery of each message: its endpoint, job, state and last answer. Readable by courier_producer; no '
    'URL, headers, body or secret.';
COMMENT ON COLUMN courier.message_deliveries.message_id IS 'Message id.';
COMMENT ON COLUMN courier.message_deliveries.event_type IS 'Event type.';
COMMENT ON COLUMN courier.message_deliveries.tenant IS 'Tenant.';
COMMENT ON COLUMN courier.message_deliveries.published_at IS 'When the message was published.';
COMMENT ON COLUMN courier.message_deliveries.endpoint_id IS 'The endpoint of this delivery.';
COMMENT ON COLUMN courier.message_deliveries.job_id IS 'The job of this delivery.';
COMMENT ON COLUMN courier.message_deliveries.resent_from IS 'The delivery it re-sends, if a re-send.';
COMMENT ON COLUMN courier.message_deliveries.state IS 'The job''s state.';
COMMENT ON COLUMN courier.message_deliveries.attempt IS 'Attempts started.';
COMMENT ON COLUMN courier.message_deliveries.max_attempts IS 'Attempts allowed.';
COMMENT ON COLUMN courier.message_deliveries.run_at IS 'Next attempt not before.';
COMMENT ON COLUMN courier.message_deliveries.finished_at IS 'When it reached a final state.';
COMMENT ON COLUMN courier.message_deliveries.last_status IS 'HTTP status of the last attempt.';
COMMENT ON COLUMN courier.message_deliveries.last_error IS 'Error of the last failed attempt.';

-- Roles ------------------------------------------------------------------------------------------

REVOKE EXECUTE ON FUNCTION courier.publish(text, jsonb, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION courier.endpoints_check() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION courier.endpoint_slot(bigint, double precision) FROM PUBLIC;
-- Producer: publish, and read its messages, their deliveries and the endpoints (never a secret).
GRANT EXECUTE ON FUNCTION courier.publish(text, jsonb, text, text) TO courier_producer, courier_operator;
GRANT SELECT ON courier.messages, courier.message_deliveries, courier.endpoints TO courier_producer;
-- Worker: the sealed secrets of what it delivers, and message history for retention.
GRANT SELECT ON courier.endpoints, courier.endpoint_secrets TO courier_worker;
GRANT SELECT, DELETE ON courier.messages TO courier_worker;
-- Operator: manages endpoints, secrets and messages (re-send writes jobs, which it may already).
GRANT SELECT, INSERT, UPDATE, DELETE ON courier.endpoints, courier.endpoint_secrets, courier.endpoint_pacing,
    courier.messages TO courier_operator;
GRANT SELECT ON courier.message_deliveries TO courier_operator;
