-- Courier 0001: the schema of the durable queue of outbound HTTP jobs.
--
-- Applied by `courier migrate` (which records it in courier.schema_migrations under an advisory
-- lock, in one transaction) or by hand with `psql -v ON_ERROR_STOP=1 -f Migrations/0001_init.sql` on an empty
-- database (add -1 to run it in one transaction). Every object carries a COMMENT so `\d+` explains itself.

CREATE SCHEMA IF NOT EXISTS courier;
COMMENT ON SCHEMA courier IS
    'Courier: a durable queue of outbound HTTP jobs (webhooks). Enqueue with courier.enqueue(...).';

-- The migrator creates this table before it applies anything; the same definition here lets the
-- file stand alone under psql.
CREATE TABLE IF NOT EXISTS courier.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE courier.schema_migrations IS
    'Migrations applied by `courier migrate`: version, file name and SHA-256 of the file.';
COMMENT ON COLUMN courier.schema_migrations.version IS 'The number the file name starts with.';
COMMENT ON COLUMN courier.schema_migrations.name IS 'The file name, e.g. 0001_init.sql.';
COMMENT ON COLUMN courier.schema_migrations.checksum IS 'Hex SHA-256 of the file as applied; a changed file is refused.';
COMMENT ON COLUMN courier.schema_migrations.applied_at IS 'When the file was applied.';

-- States ---------------------------------------------------------------------------------------

CREATE TYPE courier.job_state AS ENUM ('pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled');
COMMENT ON TYPE courier.job_state IS
    'pending: waiting for run_at; running: claimed, lease held; retrying: an attempt failed, waiting '
    'for run_at; succeeded, dead (dead letter), cancelled: final, with finished_at.';

-- Queues ---------------------------------------------------------------------------------------

CREATE TABLE courier.queues (
    name           text PRIMARY KEY,
    paused         boolean NOT NULL DEFAULT false,
    max_attempts   integer,
    retry_schedule interval[],
    signing_secret text,
    max_in_flight  integer,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT queues_name_valid CHECK (name ~ '^[A-Za-z0-9_.:-]{1,128}$'),
    CONSTRAINT queues_max_attempts_positive CHECK (max_attempts IS NULL OR max_attempts BETWEEN 1 AND 1000),
    CONSTRAINT queues_retry_schedule_valid CHECK (
        retry_schedule IS NULL
        OR (cardinality(retry_schedule) BETWEEN 1 AND 100 AND array_position(retry_schedule, NULL) IS NULL
            AND '0 seconds'::interval <= ALL (retry_schedule))),
    CONSTRAINT queues_signing_secret_format CHECK (signing_secret IS NULL OR signing_secret ~ '^whsec_[A-Za-z0-9+/=]+$'),
    CONSTRAINT queues_max_in_flight_positive CHECK (max_in_flight IS NULL OR max_in_flight >= 1)
);
COMMENT ON TABLE courier.queues IS
    'Per-queue settings. NULL means "use the default"; a queue without a row uses the defaults.';
COMMENT ON COLUMN courier.queues.name IS 'Queue name: 1-128 of A-Z a-z 0-9 _ . : -';
COMMENT ON COLUMN courier.queues.paused IS 'When true, workers claim no job of this queue.';
COMMENT ON COLUMN courier.queues.max_attempts IS 'Default max_attempts for jobs enqueued into this queue (default 10).';
COMMENT ON COLUMN courier.queues.retry_schedule IS
    'Delay after attempt 1, 2, ...; the last entry repeats. NULL: the Standard Webhooks schedule.';
COMMENT ON COLUMN courier.queues.signing_secret IS
    'Standard Webhooks secret (whsec_<base64>); requests of this queue are signed. Never shown in full.';
COMMENT ON COLUMN courier.queues.max_in_flight IS 'Most deliveries of this queue in flight per worker process.';
COMMENT ON COLUMN courier.queues.created_at IS 'When the row was created.';
COMMENT ON COLUMN courier.queues.updated_at IS 'When a setting last changed.';

-- Jobs -----------------------------------------------------------------------------------------

CREATE TABLE courier.jobs (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue           text NOT NULL DEFAULT 'default',
    state           courier.job_state NOT NULL DEFAULT 'pending',
    priority        smallint NOT NULL DEFAULT 0,
    method          text NOT NULL DEFAULT 'POST',
    url             text NOT NULL,
    headers         jsonb NOT NULL DEFAULT '{}',
    body            bytea,
    attempt         integer NOT NULL DEFAULT 0,
    max_attempts    integer NOT NULL DEFAULT 10,
    retry_schedule  interval[],
    run_at          timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    locked_by       text,
    locked_until    timestamptz,
    idempotency_key text,
    last_status     integer,
    last_error      text,
    CONSTRAINT jobs_final_states_have_finished_at
        CHECK ((state IN ('succeeded', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
    CONSTRAINT jobs_running_has_lease CHECK (state <> 'running' OR (locked_until IS NOT NULL AND locked_by IS NOT NULL)),
    CONSTRAINT jobs_attempt_nonnegative CHECK (attempt >= 0),
    CONSTRAINT jobs_max_attempts_positive CHECK (max_attempts BETWEEN 1 AND 1000),
    CONSTRAINT jobs_queue_valid CHECK (queue ~ '^[A-Za-z0-9_.:-]{1,128}$')
) WITH (
    -- A queue table is rewritten all day: leave room on each page for HOT updates, and vacuum
    -- and analyze after a small fraction of changes rather than the default 20 %.
    fillfactor = 85,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 1
);
COMMENT ON TABLE courier.jobs IS
    'One row per outbound HTTP job. Enqueue with courier.enqueue(...); workers claim due rows with '
    'FOR UPDATE SKIP LOCKED.';
COMMENT ON COLUMN courier.jobs.id IS 'Job id; sent to the receiver in the webhook-id / courier-job-id headers.';
COMMENT ON COLUMN courier.jobs.queue IS 'Queue name; settings in courier.queues.';
COMMENT ON COLUMN courier.jobs.state IS 'Lifecycle state, see courier.job_state.';
COMMENT ON COLUMN courier.jobs.priority IS 'Lower runs first (default 0).';
COMMENT ON COLUMN courier.jobs.method IS 'HTTP method, upper case.';
COMMENT ON COLUMN courier.jobs.url IS 'Absolute http or https URL of the request.';
COMMENT ON COLUMN courier.jobs.headers IS 'Request headers as a JSON object of strings.';
COMMENT ON COLUMN courier.jobs.body IS 'Request body bytes (NULL: no body).';
COMMENT ON COLUMN courier.jobs.attempt IS 'Attempts started so far.';
COMMENT ON COLUMN courier.jobs.max_attempts IS 'Attempts allowed before the job goes dead.';
COMMENT ON COLUMN courier.jobs.retry_schedule IS 'Per-job retry delays; NULL: the queue''s schedule.';
COMMENT ON COLUMN courier.jobs.run_at IS 'Not before this time: the first attempt, or the next retry.';
COMMENT ON COLUMN courier.jobs.created_at IS 'When the job was enqueued.';
COMMENT ON COLUMN courier.jobs.updated_at IS 'When the row last changed.';
COMMENT ON COLUMN courier.jobs.finished_at IS 'When the job reached succeeded, dead or cancelled.';
COMMENT ON COLUMN courier.jobs.locked_by IS 'Worker id holding the lease while running.';
COMMENT ON COLUMN courier.jobs.locked_until IS 'Lease expiry while running; the rescuer reclaims expired leases.';
COMMENT ON COLUMN courier.jobs.idempotency_key IS 'Unique per queue while set: enqueue returns the existing job.';
COMMENT ON COLUMN courier.jobs.last_status IS 'HTTP status of the last attempt (NULL: none or a transport error).';
COMMENT ON COLUMN courier.jobs.last_error IS 'Error of the last failed attempt.';

-- The claim: due rows in claim order. Partial, so finished rows cost the claim nothing.
CREATE INDEX jobs_due_idx ON courier.jobs (priority, run_at, id) WHERE state IN ('pending', 'retrying');
COMMENT ON INDEX courier.jobs_due_idx IS 'Serves the claim: due pending/retrying rows by priority, run_at, id.';

-- The rescuer: running rows by lease expiry.
CREATE INDEX jobs_lease_idx ON courier.jobs (locked_until) WHERE state = 'running';
COMMENT ON INDEX courier.jobs_lease_idx IS 'Serves the rescuer: running rows by lease expiry.';

-- Operators: lists by state and queue, newest first.
CREATE INDEX jobs_state_queue_idx ON courier.jobs (state, queue, id);
COMMENT ON INDEX courier.jobs_state_queue_idx IS 'Serves listings and counts by state and queue.';

-- Retention and purge: finished rows by age.
CREATE INDEX jobs_finished_idx ON courier.jobs (finished_at) WHERE finished_at IS NOT NULL;
COMMENT ON INDEX courier.jobs_finished_idx IS 'Serves retention and purge of finished jobs by age.';

CREATE UNIQUE INDEX jobs_idempotency_idx ON courier.jobs (queue, idempotency_key) WHERE idempotency_key IS NOT NULL;
COMMENT ON INDEX courier.jobs_idempotency_idx IS 'An idempotency key is unique per queue while set.';

-- Attempts -------------------------------------------------------------------------------------

CREATE TABLE courier.attempts (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id           bigint NOT NULL REFERENCES courier.jobs (id) ON DELETE CASCADE,
    attempt          integer NOT NULL,
    started_at       timestamptz NOT NULL,
    finished_at      timestamptz NOT NULL,
    duration_ms      double precision NOT NULL,
    status           integer,
    error            text,
    response_excerpt text,
    worker           text NOT NULL,
    CONSTRAINT attempts_excerpt_bounded CHECK (octet_length(response_excerpt) <= 20000)
) WITH (autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05);
COMMENT ON TABLE courier.attempts IS
    'One row per delivery attempt; kept across requeues, deleted with its job.';
COMMENT ON COLUMN courier.attempts.id IS 'Row id.';
COMMENT ON COLUMN courier.attempts.job_id IS 'The job.';
COMMENT ON COLUMN courier.attempts.attempt IS 'The job''s attempt number (restarts at 1 after a requeue).';
COMMENT ON COLUMN courier.attempts.started_at IS 'When the request started.';
COMMENT ON COLUMN courier.attempts.finished_at IS 'When the outcome was known.';
COMMENT ON COLUMN courier.attempts.duration_ms IS 'Request duration in milliseconds.';
COMMENT ON COLUMN courier.attempts.status IS 'HTTP status, or NULL for a transport error.';
COMMENT ON COLUMN courier.attempts.error IS 'Why the attempt failed; NULL on success.';
COMMENT ON COLUMN courier.attempts.response_excerpt IS 'First bytes of the response body (at most 20,000).';
COMMENT ON COLUMN courier.attempts.worker IS 'Worker id that made the attempt.';

CREATE INDEX attempts_job_idx ON courier.attempts (job_id, id);
COMMENT ON INDEX courier.attempts_job_idx IS 'Serves a job''s history and the cascade on delete.';
CREATE INDEX attempts_finished_idx ON courier.attempts (finished_at);
COMMENT ON INDEX courier.attempts_finished_idx IS 'Serves latency statistics over recent attempts.';

-- Validation -----------------------------------------------------------------------------------

CREATE FUNCTION courier.validate_job(
    url text, method text, headers jsonb, queue text, body_size integer, max_attempts integer,
    priority integer, retry_schedule interval[], idempotency_key text, run_at timestamptz
) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    header record;
BEGIN
    IF url IS NULL OR url = '' THEN
        RAISE EXCEPTION 'url is required' USING ERRCODE = '22023', HINT = 'Pass an absolute http or https URL.';
    END IF;
    IF length(url) > 8192 THEN
        RAISE EXCEPTION 'url is longer than 8192 characters' USING ERRCODE = '22023';
    END IF;
    IF url !~* '^https?://' THEN
        RAISE EXCEPTION 'url must be an absolute http or https URL: %', left(url, 200)
            USING ERRCODE = '22023', HINT = 'Start it with http:// or https://.';
    END IF;
    IF url ~ '[[:space:][:cntrl:]]' THEN
        RAISE EXCEPTION 'url must not contain spaces or control characters' USING ERRCODE = '22023';
    END IF;
    IF url ~* '^https?://[^/?#]*@' THEN
        RAISE EXCEPTION 'url must not contain credentials (user:password@)'
            USING ERRCODE = '22023', HINT = 'Send credentials in a header instead.';
    END IF;
    IF url !~* '^https?://(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?)(:[0-9]{1,5})?([/?#]|$)' THEN
        RAISE EXCEPTION 'url has no valid host: %', left(url, 200) USING ERRCODE = '22023';
    END IF;
    IF method IS NULL OR upper(method) NOT IN ('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS') THEN
        RAISE EXCEPTION 'method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, got %', coalesce(method, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF headers IS NULL OR jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'headers must be a JSON object of strings' USING ERRCODE = '22023';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(headers)) > 64 THEN
        RAISE EXCEPTION 'headers has more than 64 entries' USING ERRCODE = '22023';
    END IF;
    FOR header IN SELECT key, value FROM jsonb_each(headers) LOOP
        IF header.key !~ '^[!#$%&''*+.^_`|~0-9A-Za-z-]+$' THEN
            RAISE EXCEPTION 'headers: % is not a legal header name', quote_literal(left(header.key, 100))
                USING ERRCODE = '22023';
        END IF;
        IF jsonb_typeof(header.value) <> 'string' THEN
            RAISE EXCEPTION 'headers: the value of % must be a string', header.key USING ERRCODE = '22023';
        END IF;
        IF (header.value #>> '{}') ~ '[\r\n\x01-\x08\x0b\x0c\x0e-\x1f\x7f]' THEN
            RAISE EXCEPTION 'headers: the value of % contains CR, LF or another control character', header.key
                USING ERRCODE = '22023';
        END IF;
        IF octet_length(header.value #>> '{}') > 8192 THEN
            RAISE EXCEPTION 'headers: the value of % is longer than 8192 bytes', header.key USING ERRCODE = '22023';
        END IF;
        IF lower(header.key) IN ('host', 'content-length', 'transfer-encoding', 'connection', 'upgrade', 'te',
                                  'keep-alive', 'trailer', 'proxy-connection') THEN
            RAISE EXCEPTION 'headers: % is set by Courier and cannot be given', header.key USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF queue IS NULL OR queue = '' THEN
        RAISE EXCEPTION 'queue must not be empty' USING ERRCODE = '22023';
    END IF;
    IF queue !~ '^[A-Za-z0-9_.:-]{1,128}$' THEN
        RAISE EXCEPTION 'queue must be 1-128 characters of A-Z a-z 0-9 _ . : -, got %', left(queue, 200)
            USING ERRCODE = '22023';
    END IF;
    IF body_size > 1048576 THEN
        RAISE EXCEPTION 'payload is % bytes, above the limit of 1048576 bytes (1 MiB)', body_size
            USING ERRCODE = '22023';
    END IF;
    IF max_attempts IS NOT NULL AND (max_attempts < 1 OR max_attempts > 1000) THEN
        RAISE EXCEPTION 'max_attempts must be between 1 and 1000, got %', max_attempts USING ERRCODE = '22023';
    END IF;
    IF priority IS NULL OR priority < -32768 OR priority > 32767 THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767, got %', coalesce(priority::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF retry_schedule IS NOT NULL AND (cardinality(retry_schedule) NOT BETWEEN 1 AND 100
            OR array_position(retry_schedule, NULL) IS NOT NULL
            OR NOT ('0 seconds'::interval <= ALL (retry_schedule))) THEN
        RAISE EXCEPTION 'retry_schedule must hold 1 to 100 non-negative intervals' USING ERRCODE = '22023';
    END IF;
    IF idempotency_key IS NOT NULL AND (idempotency_key = '' OR length(idempotency_key) > 255) THEN
        RAISE EXCEPTION 'idempotency_key must be 1-255 characters when given' USING ERRCODE = '22023';
    END IF;
    IF run_at IS NULL THEN
        RAISE EXCEPTION 'run_at must not be NULL' USING ERRCODE = '22023';
    END IF;
END;
$$;
COMMENT ON FUNCTION courier.validate_job(text, text, jsonb, text, integer, integer, integer, interval[], text, timestamptz) IS
    'Raises a clear error (SQLSTATE 22023) naming the first bad field of a job; shared by enqueue and the bulk loader.';

-- Enqueue --------------------------------------------------------------------------------------

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
    retry_schedule interval[] DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    new_id bigint;
    attempts integer;
BEGIN
    PERFORM courier.validate_job(enqueue_raw.url, enqueue_raw.method, enqueue_raw.headers, enqueue_raw.queue,
        coalesce(octet_length(enqueue_raw.body), 0), enqueue_raw.max_attempts, enqueue_raw.priority,
        enqueue_raw.retry_schedule, enqueue_raw.idempotency_key, enqueue_raw.run_at);
    attempts := coalesce(enqueue_raw.max_attempts,
        (SELECT q.max_attempts FROM courier.queues q WHERE q.name = enqueue_raw.queue), 10);
    INSERT INTO courier.jobs AS j (queue, priority, method, url, headers, body, max_attempts, retry_schedule,
                                   run_at, idempotency_key)
    VALUES (enqueue_raw.queue, enqueue_raw.priority, upper(enqueue_raw.method), enqueue_raw.url,
            enqueue_raw.headers, enqueue_raw.body, attempts, enqueue_raw.retry_schedule, enqueue_raw.run_at,
            enqueue_raw.idempotency_key)
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING j.id INTO new_id;
    IF new_id IS NULL THEN
        SELECT j.id INTO new_id FROM courier.jobs j
        WHERE j.queue = enqueue_raw.queue AND j.idempotency_key = enqueue_raw.idempotency_key;
    END IF;
    RETURN new_id;
END;
$$;
COMMENT ON FUNCTION courier.enqueue_raw(text, bytea, text, jsonb, text, timestamptz, integer, text, integer, interval[]) IS
    'Enqueues an HTTP job with a raw body (any bytes, or NULL for none) and returns its id; with an '
    'idempotency key already in the queue, returns the existing id and writes nothing.';

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
    retry_schedule interval[] DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    request_headers jsonb := enqueue.headers;
BEGIN
    -- A JSON payload is sent as JSON unless the caller chose a Content-Type.
    IF enqueue.payload IS NOT NULL AND jsonb_typeof(request_headers) = 'object' AND NOT EXISTS (
        SELECT 1 FROM jsonb_object_keys(request_headers) k WHERE lower(k) = 'content-type'
    ) THEN
        request_headers := request_headers || '{"Content-Type": "application/json"}';
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
        retry_schedule => enqueue.retry_schedule);
END;
$$;
COMMENT ON FUNCTION courier.enqueue(text, jsonb, text, jsonb, text, timestamptz, integer, text, integer, interval[]) IS
    'Enqueues an HTTP job whose body is the JSON payload (Content-Type: application/json unless given) '
    'and returns its id. Validates every field and raises a clear error, writing nothing, on bad input.';

-- Wake-ups -------------------------------------------------------------------------------------

-- One NOTIFY per inserting statement and queue, not per row: a bulk insert of 50,000 jobs wakes
-- the workers once. PostgreSQL also folds identical notifications within a transaction.
CREATE FUNCTION courier.notify_jobs_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    due_queue text;
BEGIN
    FOR due_queue IN SELECT DISTINCT n.queue FROM new_jobs n WHERE n.run_at <= now() LOOP
        PERFORM pg_notify('courier_jobs', due_queue);
    END LOOP;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION courier.notify_jobs_inserted() IS
    'Statement trigger: NOTIFY courier_jobs once per queue that received due jobs.';

CREATE TRIGGER jobs_notify_inserted AFTER INSERT ON courier.jobs
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION courier.notify_jobs_inserted();
COMMENT ON TRIGGER jobs_notify_inserted ON courier.jobs IS 'Wakes listening workers when due jobs arrive.';

-- Health ---------------------------------------------------------------------------------------

CREATE VIEW courier.queue_stats AS
SELECT j.queue, j.state, count(*) AS jobs, min(j.run_at) AS oldest_run_at
FROM courier.jobs j
GROUP BY j.queue, j.state;
COMMENT ON VIEW courier.queue_stats IS 'Per queue and state: the number of jobs and the oldest run_at.';
COMMENT ON COLUMN courier.queue_stats.queue IS 'Queue name.';
COMMENT ON COLUMN courier.queue_stats.state IS 'Job state.';
COMMENT ON COLUMN courier.queue_stats.jobs IS 'Number of jobs in this queue and state.';
COMMENT ON COLUMN courier.queue_stats.oldest_run_at IS 'The earliest run_at among them (for due states: the lag).';
